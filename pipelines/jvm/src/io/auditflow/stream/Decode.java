package io.auditflow.stream;

import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

import java.util.HashMap;

/**
 * Decodes the af1 wire form once per record (the JVM twin of
 * {@code auditflow.records.TransactionEvent.from_wire}: the same checks in the same order, the
 * same field names and reasons: 16 fields and the tag, integers, amounts not negative,
 * currencies, payment format, label, event time within the years 1-9999, ids) and splits the
 * stream: rejects and late records to side outputs, the rest on as events with their event-level
 * features. What it lets through {@code from_wire} decodes, so the Python stages after it never
 * meet a record they cannot read.
 *
 * <p>Input rows: {@code value} (the record's bytes), {@code src, off, topic, part} with event time.
 * Bytes that are not UTF-8 are a reject (field {@code value}, base64 raw). A record is late when
 * its time plus the allowed lateness is at or behind this operator's watermark. Dead letters are
 * capped ({@link DeadLetter}).
 */
final class Decode extends ProcessFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    static final String TAG = "af1";
    static final int FIELDS = 16;
    // wire field positions (auditflow.records.WIRE_FIELDS)
    static final int F_EID = 1, F_TS = 2, F_OFF = 3, F_FB = 4, F_FA = 5, F_TB = 6, F_TA = 7, F_PU = 8, F_PC = 9,
            F_RU = 10, F_RC = 11, F_PUSD = 12, F_RUSD = 13, F_FMT = 14, F_LAUND = 15;
    static final int[] INT_FIELDS = {F_TS, F_OFF, F_PU, F_RU, F_PUSD, F_RUSD};
    static final int[] AMOUNT_FIELDS = {F_PU, F_RU, F_PUSD, F_RUSD};
    static final int[] ID_FIELDS = {F_EID, F_FB, F_FA, F_TB, F_TA};
    // auditflow.records.WIRE_TS_MIN_MS / WIRE_TS_MAX_MS: the years 1-9999 in epoch ms
    static final long WIRE_TS_MIN_MS = -62135596800000L;
    static final long WIRE_TS_MAX_MS = 253402300799999L;
    // auditflow.records.ID_PATTERN ([A-Za-z0-9_.:-]{1,64}) and ID_REASON
    static final int ID_MAX_LENGTH = 64;
    static final String ID_REASON =
            "expected 1 to 64 of A-Z a-z 0-9 _ . : - (no '/', whitespace or control characters)";

    private final String[] wireNames;
    private final HashMap<String, Long> roundUnit; // currency -> 100 * 10^scale
    private final HashMap<String, Integer> formats;
    private final long latenessMs;

    Decode(String[] wireNames, String[] currencies, long[] roundUnits, String[] formats, long latenessMs) {
        this.wireNames = wireNames;
        this.roundUnit = new HashMap<>();
        for (int i = 0; i < currencies.length; i++) roundUnit.put(currencies[i], roundUnits[i]);
        this.formats = new HashMap<>();
        for (int i = 0; i < formats.length; i++) this.formats.put(formats[i], i);
        this.latenessMs = latenessMs;
    }

    static boolean isInt(String s) {
        int n = s.length(), i = 0;
        if (n > 0 && s.charAt(0) == '-') i = 1;
        int digits = n - i;
        if (digits < 1 || digits > 18) return false;
        for (; i < n; i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '9') return false;
        }
        return true;
    }

    /** Whether {@code s} is an id by auditflow.records.ID_PATTERN. */
    static boolean isId(String s) {
        int n = s.length();
        if (n < 1 || n > ID_MAX_LENGTH) return false;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
                    || c == '_' || c == '.' || c == ':' || c == '-')) return false;
        }
        return true;
    }

    /** The wire fields, or null unless there are exactly FIELDS of them. */
    static String[] split(String v) {
        String[] out = new String[FIELDS];
        int start = 0, k = 0;
        for (int i = 0; i < v.length(); i++) {
            if (v.charAt(i) == ',') {
                if (k == FIELDS - 1) return null;
                out[k++] = v.substring(start, i);
                start = i + 1;
            }
        }
        if (k != FIELDS - 1) return null;
        out[k] = v.substring(start);
        return out;
    }

    private static final byte[] NO_BYTES = new byte[0];

    private void reject(Row in, Context ctx, String field, String value, String reason) {
        byte[] b = (byte[]) in.getField(0);
        emit(in, ctx, b == null ? NO_BYTES : b, true, field, value, reason);
    }

    private static void emit(Row in, Context ctx, byte[] b, boolean utf8, String field, String value, String reason) {
        Object[] raw = DeadLetter.raw(b, utf8);
        ctx.output(StreamFeatures.REJECTS, Row.of(in.getField(1), in.getField(2), in.getField(3), in.getField(4),
                raw[0], raw[1], raw[2], raw[3], field, DeadLetter.cut(value, DeadLetter.MAX_VALUE_CHARS), reason));
    }

    @Override
    public void processElement(Row in, Context ctx, Collector<Row> out) {
        byte[] bytes = (byte[]) in.getField(0);
        String v = bytes == null ? null : DeadLetter.text(bytes);
        if (bytes != null && v == null) {
            int at = DeadLetter.invalidAt(bytes);
            emit(in, ctx, bytes, false, "value", String.format("\\x%02x", bytes[at] & 0xFF),
                    "not valid UTF-8 at byte " + at);
            return;
        }
        String[] f = v == null ? null : split(v);
        if (f == null || !TAG.equals(f[0])) {
            String raw = v == null ? "" : v;
            reject(in, ctx, "value", DeadLetter.cut(raw, 80), "not an " + TAG + " wire record of " + FIELDS + " fields");
            return;
        }
        for (int i : INT_FIELDS) {
            if (!isInt(f[i])) {
                reject(in, ctx, wireNames[i], f[i], "expected an integer");
                return;
            }
        }
        for (int i : AMOUNT_FIELDS) {
            if (Long.parseLong(f[i]) < 0) {
                reject(in, ctx, wireNames[i], f[i], "negative amount");
                return;
            }
        }
        for (int i : new int[] {F_PC, F_RC}) {
            if (!roundUnit.containsKey(f[i])) {
                reject(in, ctx, wireNames[i], f[i], "unknown currency");
                return;
            }
        }
        Integer fmt = formats.get(f[F_FMT]);
        if (fmt == null) {
            reject(in, ctx, wireNames[F_FMT], f[F_FMT], "unknown payment format");
            return;
        }
        if (!"0".equals(f[F_LAUND]) && !"1".equals(f[F_LAUND])) {
            reject(in, ctx, wireNames[F_LAUND], f[F_LAUND], "expected 0 or 1");
            return;
        }
        long ts = Long.parseLong(f[F_TS]);
        if (ts < WIRE_TS_MIN_MS || ts > WIRE_TS_MAX_MS) {
            reject(in, ctx, wireNames[F_TS], f[F_TS], "outside the years 1-9999");
            return;
        }
        for (int i : ID_FIELDS) {
            if (!isId(f[i])) {
                reject(in, ctx, wireNames[i], f[i], ID_REASON);
                return;
            }
        }
        long wm = ctx.timerService().currentWatermark();
        if (wm != Long.MIN_VALUE && ts + latenessMs <= wm) {
            Object[] raw = DeadLetter.raw(bytes, true); // a valid record: all of it
            ctx.output(StreamFeatures.LATE, Row.of(in.getField(1), in.getField(2), in.getField(3), in.getField(4), raw[0],
                    raw[1], raw[2], raw[3], f[F_TS], wm));
            return;
        }
        long paidUnits = Long.parseLong(f[F_PU]);
        long paidUsd = Long.parseLong(f[F_PUSD]);
        double[] ev = {
            (double) paidUsd / 100.0,
            f[F_PC].equals(f[F_RC]) ? 0.0 : 1.0,
            f[F_FB].equals(f[F_TB]) && f[F_FA].equals(f[F_TA]) ? 1.0 : 0.0,
            (double) fmt,
            (double) Math.floorMod(Math.floorDiv(ts, 3_600_000L), 24L),
            paidUnits % roundUnit.get(f[F_PC]) == 0 ? 1.0 : 0.0,
            (double) System.currentTimeMillis(), // its arrival at the job (wall clock): the deep path's clock starts here
        };
        Row r = new Row(StreamFeatures.INPUT.getArity());
        r.setField(StreamFeatures.EID, f[F_EID]);
        r.setField(StreamFeatures.TS, ts);
        r.setField(StreamFeatures.OFFSET, Long.parseLong(f[F_OFF]));
        r.setField(StreamFeatures.SND, f[F_FB] + "/" + f[F_FA]);
        r.setField(StreamFeatures.RCV, f[F_TB] + "/" + f[F_TA]);
        r.setField(StreamFeatures.PAID, paidUsd);
        r.setField(StreamFeatures.RECV, Long.parseLong(f[F_RUSD]));
        r.setField(StreamFeatures.PAYLOAD, v);
        r.setField(StreamFeatures.EVENT_FEATURES, ev);
        out.collect(r);
    }
}
