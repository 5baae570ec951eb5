package io.auditflow.stream;

import org.apache.flink.api.common.typeutils.SimpleTypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;
import org.apache.flink.types.StringValue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Map;

/**
 * The serializer of an account's state ({@link StreamFeatures.AccountState}): its window's fields
 * written out one by one (the ring's live legs only) and a deep copy by hand.
 *
 * <p>Why not Flink's default: {@code AccountWindow} is not a POJO, so its state went through Kryo,
 * and the heap state backend copies an entry with the serializer when it is written while a
 * checkpoint is being taken (copy-on-write). A Kryo deep copy of every account touched during each
 * checkpoint's asynchronous phase, on the task's own thread, stalled the stream for a few hundred
 * ms every checkpoint (bench/stream_throughput.py's live latency showed the spikes at the
 * checkpoint interval, gone with checkpoints off). The format (version 2) is compact, since a
 * heap-backend checkpoint writes every account's state each time: counterparties once per account
 * as a dictionary, the ring's live legs as varints (minute deltas, cents, dictionary index, one flag
 * byte); about 6 bytes a leg instead of ~33 in version 1 (which nothing reads any more).
 */
public final class AccountStateSerializer extends TypeSerializer<StreamFeatures.AccountState> {
    private static final long serialVersionUID = 1L;
    public static final AccountStateSerializer INSTANCE = new AccountStateSerializer();
    private static final int VERSION = 2;

    @Override
    public boolean isImmutableType() {
        return false;
    }

    @Override
    public TypeSerializer<StreamFeatures.AccountState> duplicate() {
        return this; // stateless
    }

    @Override
    public StreamFeatures.AccountState createInstance() {
        return new StreamFeatures.AccountState();
    }

    @Override
    public StreamFeatures.AccountState copy(StreamFeatures.AccountState from) {
        StreamFeatures.AccountState s = new StreamFeatures.AccountState();
        s.window = from.window == null ? null : copyWindow(from.window);
        s.pending = new ArrayList<>(from.pending.size());
        for (StreamFeatures.Leg l : from.pending) s.pending.add(l); // legs are never changed once made
        s.cleanupAt = from.cleanupAt;
        return s;
    }

    @Override
    public StreamFeatures.AccountState copy(StreamFeatures.AccountState from, StreamFeatures.AccountState reuse) {
        return copy(from);
    }

    @Override
    public int getLength() {
        return -1;
    }

    static AccountWindow copyWindow(AccountWindow a) {
        AccountWindow b = new AccountWindow(a.windows, a.maxLegs, a.recentLegs, a.cpWindow);
        b.minute = a.minute.clone();
        b.cents = a.cents.clone();
        b.cp = a.cp.clone();
        b.out = a.out.clone();
        b.wasNew = a.wasNew.clone();
        b.head = a.head;
        b.tail = a.tail;
        for (int w = 0; w < a.nWin; w++) {
            b.first[w] = a.first[w];
            b.n[w][0] = a.n[w][0];
            b.n[w][1] = a.n[w][1];
            b.sum[w][0] = a.sum[w][0];
            b.sum[w][1] = a.sum[w][1];
            b.newN[w] = a.newN[w];
            for (int d = 0; d < 2; d++) {
                HashMap<String, int[]> to = b.cps[w][d];
                for (Map.Entry<String, int[]> e : a.cps[w][d].entrySet()) to.put(e.getKey(), e.getValue().clone());
            }
        }
        b.seen = a.seen;
        b.lastMinute = a.lastMinute;
        b.firstMinute = a.firstMinute;
        b.nLife = a.nLife;
        b.hasLast = a.hasLast.clone();
        b.lastLegMinute = a.lastLegMinute.clone();
        b.lastLegCents = a.lastLegCents.clone();
        b.lastLegSeq = a.lastLegSeq.clone();
        b.recent = a.recent.clone();
        b.recentSorted = a.recentSorted.clone();
        b.recentN = a.recentN;
        b.recentAdded = a.recentAdded;
        return b;
    }

    @Override
    public void serialize(StreamFeatures.AccountState s, DataOutputView out) throws IOException {
        out.writeByte(VERSION);
        out.writeLong(s.cleanupAt);
        out.writeInt(s.pending.size());
        for (StreamFeatures.Leg l : s.pending) {
            StringValue.writeString(l.account, out);
            out.writeLong(l.ts);
            out.writeLong(l.offset);
            StringValue.writeString(l.eid, out);
            out.writeBoolean(l.out);
            StringValue.writeString(l.counterparty, out);
            out.writeLong(l.cents);
        }
        out.writeBoolean(s.window != null);
        if (s.window != null) writeWindow(s.window, out);
    }

    private static void writeWindow(AccountWindow a, DataOutputView out) throws IOException {
        out.writeInt(a.nWin);
        for (long w : a.windows) out.writeLong(w);
        out.writeInt(a.maxLegs);
        out.writeInt(a.recentLegs);
        out.writeInt(a.cpWindow);
        // counterparties once, as a dictionary: the ring's legs and the per-window counts refer to it
        HashMap<String, Integer> index = new HashMap<>();
        ArrayList<String> names = new ArrayList<>();
        int mask = a.minute.length - 1;
        for (long seq = a.head; seq < a.tail; seq++) intern(a.cp[(int) (seq & mask)], index, names);
        for (int w = 0; w < a.nWin; w++)
            for (int d = 0; d < 2; d++)
                for (String k : a.cps[w][d].keySet()) intern(k, index, names);
        writeVarint(out, names.size());
        for (String nm : names) StringValue.writeString(nm, out);
        out.writeInt(a.minute.length);
        out.writeLong(a.head);
        writeVarint(out, a.tail - a.head);
        long prevMinute = 0;
        for (long seq = a.head; seq < a.tail; seq++) {
            int i = (int) (seq & mask);
            writeVarint(out, zigzag(a.minute[i] - prevMinute)); // legs in time order: small deltas
            prevMinute = a.minute[i];
            writeVarint(out, zigzag(a.cents[i]));
            writeVarint(out, a.cp[i] == null ? 0 : index.get(a.cp[i]) + 1);
            out.writeByte((a.out[i] ? 1 : 0) | (a.wasNew[i] ? 2 : 0));
        }
        for (int w = 0; w < a.nWin; w++) {
            writeVarint(out, zigzag(a.first[w] - a.head));
            writeVarint(out, zigzag(a.n[w][0]));
            writeVarint(out, zigzag(a.n[w][1]));
            writeVarint(out, zigzag(a.sum[w][0]));
            writeVarint(out, zigzag(a.sum[w][1]));
            writeVarint(out, zigzag(a.newN[w]));
            for (int d = 0; d < 2; d++) {
                writeVarint(out, a.cps[w][d].size());
                for (Map.Entry<String, int[]> e : a.cps[w][d].entrySet()) {
                    writeVarint(out, index.get(e.getKey()));
                    int[] c = e.getValue();
                    writeVarint(out, c.length);
                    for (int x : c) writeVarint(out, zigzag(x));
                }
            }
        }
        out.writeBoolean(a.seen);
        out.writeLong(a.lastMinute);
        out.writeLong(a.firstMinute);
        writeVarint(out, zigzag(a.nLife));
        for (int d = 0; d < 2; d++) {
            out.writeBoolean(a.hasLast[d]);
            out.writeLong(a.lastLegMinute[d]);
            writeVarint(out, zigzag(a.lastLegCents[d]));
            writeVarint(out, zigzag(a.lastLegSeq[d]));
        }
        for (int k = 0; k < a.recentLegs; k++) {
            writeVarint(out, zigzag(a.recent[k]));
            writeVarint(out, zigzag(a.recentSorted[k]));
        }
        out.writeInt(a.recentN);
        writeVarint(out, zigzag(a.recentAdded));
    }

    private static void intern(String s, HashMap<String, Integer> index, ArrayList<String> names) {
        if (s != null && !index.containsKey(s)) {
            index.put(s, names.size());
            names.add(s);
        }
    }

    static long zigzag(long v) {
        return (v << 1) ^ (v >> 63);
    }

    static long unzigzag(long v) {
        return (v >>> 1) ^ -(v & 1);
    }

    /** Unsigned LEB128: 7 bits a byte, low first. */
    static void writeVarint(DataOutputView out, long v) throws IOException {
        while ((v & ~0x7FL) != 0) {
            out.writeByte((int) ((v & 0x7F) | 0x80));
            v >>>= 7;
        }
        out.writeByte((int) v);
    }

    static long readVarint(DataInputView in) throws IOException {
        long v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            int b = in.readUnsignedByte();
            v |= (long) (b & 0x7F) << shift;
            if ((b & 0x80) == 0) return v;
        }
        throw new IOException("varint longer than 64 bits in account state");
    }

    @Override
    public StreamFeatures.AccountState deserialize(DataInputView in) throws IOException {
        int version = in.readByte();
        if (version != VERSION) throw new IOException("account state of format version " + version + ", expected " + VERSION);
        StreamFeatures.AccountState s = new StreamFeatures.AccountState();
        s.cleanupAt = in.readLong();
        int n = in.readInt();
        s.pending = new ArrayList<>(n);
        for (int k = 0; k < n; k++) {
            StreamFeatures.Leg l = new StreamFeatures.Leg();
            l.account = StringValue.readString(in);
            l.ts = in.readLong();
            l.offset = in.readLong();
            l.eid = StringValue.readString(in);
            l.out = in.readBoolean();
            l.counterparty = StringValue.readString(in);
            l.cents = in.readLong();
            s.pending.add(l);
        }
        s.window = in.readBoolean() ? readWindow(in) : null;
        return s;
    }

    private static AccountWindow readWindow(DataInputView in) throws IOException {
        int nWin = in.readInt();
        long[] windows = new long[nWin];
        for (int w = 0; w < nWin; w++) windows[w] = in.readLong();
        AccountWindow a = new AccountWindow(windows, in.readInt(), in.readInt(), in.readInt());
        String[] names = new String[(int) readVarint(in)];
        for (int k = 0; k < names.length; k++) names[k] = StringValue.readString(in);
        int cap = in.readInt();
        a.minute = new long[cap];
        a.cents = new long[cap];
        a.cp = new String[cap];
        a.out = new boolean[cap];
        a.wasNew = new boolean[cap];
        a.head = in.readLong();
        a.tail = a.head + readVarint(in);
        int mask = cap - 1;
        long prevMinute = 0;
        for (long seq = a.head; seq < a.tail; seq++) {
            int i = (int) (seq & mask);
            a.minute[i] = prevMinute + unzigzag(readVarint(in));
            prevMinute = a.minute[i];
            a.cents[i] = unzigzag(readVarint(in));
            int cp = (int) readVarint(in);
            a.cp[i] = cp == 0 ? null : names[cp - 1];
            int flags = in.readUnsignedByte();
            a.out[i] = (flags & 1) != 0;
            a.wasNew[i] = (flags & 2) != 0;
        }
        for (int w = 0; w < nWin; w++) {
            a.first[w] = a.head + unzigzag(readVarint(in));
            a.n[w][0] = unzigzag(readVarint(in));
            a.n[w][1] = unzigzag(readVarint(in));
            a.sum[w][0] = unzigzag(readVarint(in));
            a.sum[w][1] = unzigzag(readVarint(in));
            a.newN[w] = unzigzag(readVarint(in));
            for (int d = 0; d < 2; d++) {
                int m = (int) readVarint(in);
                HashMap<String, int[]> map = a.cps[w][d];
                for (int k = 0; k < m; k++) {
                    String key = names[(int) readVarint(in)];
                    int[] c = new int[(int) readVarint(in)];
                    for (int j = 0; j < c.length; j++) c[j] = (int) unzigzag(readVarint(in));
                    map.put(key, c);
                }
            }
        }
        a.seen = in.readBoolean();
        a.lastMinute = in.readLong();
        a.firstMinute = in.readLong();
        a.nLife = unzigzag(readVarint(in));
        for (int d = 0; d < 2; d++) {
            a.hasLast[d] = in.readBoolean();
            a.lastLegMinute[d] = in.readLong();
            a.lastLegCents[d] = unzigzag(readVarint(in));
            a.lastLegSeq[d] = unzigzag(readVarint(in));
        }
        for (int k = 0; k < a.recentLegs; k++) {
            a.recent[k] = unzigzag(readVarint(in));
            a.recentSorted[k] = unzigzag(readVarint(in));
        }
        a.recentN = in.readInt();
        a.recentAdded = unzigzag(readVarint(in));
        return a;
    }

    @Override
    public StreamFeatures.AccountState deserialize(StreamFeatures.AccountState reuse, DataInputView in) throws IOException {
        return deserialize(in);
    }

    @Override
    public void copy(DataInputView source, DataOutputView target) throws IOException {
        serialize(deserialize(source), target);
    }

    @Override
    public boolean equals(Object obj) {
        return obj instanceof AccountStateSerializer;
    }

    @Override
    public int hashCode() {
        return AccountStateSerializer.class.hashCode();
    }

    @Override
    public TypeSerializerSnapshot<StreamFeatures.AccountState> snapshotConfiguration() {
        return new Snapshot();
    }

    /** The serializer's snapshot: no configuration (the format version is in each record). */
    public static final class Snapshot extends SimpleTypeSerializerSnapshot<StreamFeatures.AccountState> {
        public Snapshot() {
            super(() -> INSTANCE);
        }
    }
}
