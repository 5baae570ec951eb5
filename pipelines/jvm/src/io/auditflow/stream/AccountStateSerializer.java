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
 * checkpoint interval, gone with checkpoints off). Version 1 of the format.
 */
public final class AccountStateSerializer extends TypeSerializer<StreamFeatures.AccountState> {
    private static final long serialVersionUID = 1L;
    public static final AccountStateSerializer INSTANCE = new AccountStateSerializer();
    private static final int VERSION = 1;

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
        out.writeInt(a.minute.length);
        out.writeLong(a.head);
        out.writeLong(a.tail);
        int mask = a.minute.length - 1;
        for (long seq = a.head; seq < a.tail; seq++) {
            int i = (int) (seq & mask);
            out.writeLong(a.minute[i]);
            out.writeLong(a.cents[i]);
            StringValue.writeString(a.cp[i], out);
            out.writeBoolean(a.out[i]);
            out.writeBoolean(a.wasNew[i]);
        }
        for (int w = 0; w < a.nWin; w++) {
            out.writeLong(a.first[w]);
            out.writeLong(a.n[w][0]);
            out.writeLong(a.n[w][1]);
            out.writeLong(a.sum[w][0]);
            out.writeLong(a.sum[w][1]);
            out.writeLong(a.newN[w]);
            for (int d = 0; d < 2; d++) {
                out.writeInt(a.cps[w][d].size());
                for (Map.Entry<String, int[]> e : a.cps[w][d].entrySet()) {
                    StringValue.writeString(e.getKey(), out);
                    int[] c = e.getValue();
                    out.writeInt(c.length);
                    for (int x : c) out.writeInt(x);
                }
            }
        }
        out.writeBoolean(a.seen);
        out.writeLong(a.lastMinute);
        out.writeLong(a.firstMinute);
        out.writeLong(a.nLife);
        for (int d = 0; d < 2; d++) {
            out.writeBoolean(a.hasLast[d]);
            out.writeLong(a.lastLegMinute[d]);
            out.writeLong(a.lastLegCents[d]);
            out.writeLong(a.lastLegSeq[d]);
        }
        for (int k = 0; k < a.recentLegs; k++) {
            out.writeLong(a.recent[k]);
            out.writeLong(a.recentSorted[k]);
        }
        out.writeInt(a.recentN);
        out.writeLong(a.recentAdded);
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
        int cap = in.readInt();
        a.minute = new long[cap];
        a.cents = new long[cap];
        a.cp = new String[cap];
        a.out = new boolean[cap];
        a.wasNew = new boolean[cap];
        a.head = in.readLong();
        a.tail = in.readLong();
        int mask = cap - 1;
        for (long seq = a.head; seq < a.tail; seq++) {
            int i = (int) (seq & mask);
            a.minute[i] = in.readLong();
            a.cents[i] = in.readLong();
            a.cp[i] = StringValue.readString(in);
            a.out[i] = in.readBoolean();
            a.wasNew[i] = in.readBoolean();
        }
        for (int w = 0; w < nWin; w++) {
            a.first[w] = in.readLong();
            a.n[w][0] = in.readLong();
            a.n[w][1] = in.readLong();
            a.sum[w][0] = in.readLong();
            a.sum[w][1] = in.readLong();
            a.newN[w] = in.readLong();
            for (int d = 0; d < 2; d++) {
                int m = in.readInt();
                HashMap<String, int[]> map = a.cps[w][d];
                for (int k = 0; k < m; k++) {
                    String key = StringValue.readString(in);
                    int[] c = new int[in.readInt()];
                    for (int j = 0; j < c.length; j++) c[j] = in.readInt();
                    map.put(key, c);
                }
            }
        }
        a.seen = in.readBoolean();
        a.lastMinute = in.readLong();
        a.firstMinute = in.readLong();
        a.nLife = in.readLong();
        for (int d = 0; d < 2; d++) {
            a.hasLast[d] = in.readBoolean();
            a.lastLegMinute[d] = in.readLong();
            a.lastLegCents[d] = in.readLong();
            a.lastLegSeq[d] = in.readLong();
        }
        for (int k = 0; k < a.recentLegs; k++) {
            a.recent[k] = in.readLong();
            a.recentSorted[k] = in.readLong();
        }
        a.recentN = in.readInt();
        a.recentAdded = in.readLong();
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
