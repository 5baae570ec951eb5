package io.auditflow.stream;

import org.apache.flink.api.common.accumulators.LongCounter;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;
import org.apache.flink.util.OutputTag;

import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;

/**
 * Drift counting in the JVM: per tumbling event-time pane, the bin counts of every (segment,
 * feature) block of the reference's flat layout ({@code pipelines.drift.Layout}). The bins are
 * computed in the JVM from the reference's frozen edges and levels ({@link Params}), by
 * {@link Codes} where each event's features are made: the numeric features from the packed
 * feature doubles the account operators computed, the segments and categorical features from the
 * af1 record's fields; the score, which only the fast path knows, here from its result.
 *
 * <p>Input rows: {@code codes BYTES} (from {@link Codes}) and {@code r ROW<s DOUBLE, m STRING>}:
 * the fast path's score and, when the event alerts, its alert message. Alert messages go to
 * {@link #ALERTS}; the main output is one row per pane, {@code start BIGINT, panes BYTES},
 * emitted once the watermark has passed the pane's end plus the allowed lateness (every event of
 * the pane is then counted: the feature rows of an event come out of the account operators when
 * the watermark passes its time plus the lateness). {@code panes} holds that pane and up to
 * {@link Params#history} panes before it (for alert rules over consecutive windows), oldest
 * first, each as little-endian longs: start, events, first source offset, last source offset,
 * then the counts. Panes without events between two that have some are emitted too (all counts
 * 0).
 *
 * <p>Bins as {@code pipelines.drift.bin_index} / {@code level_index} define them: a numeric
 * value below the first edge is bin 0, above the last edge or not finite the last bin, otherwise
 * the number of edges at or below it (numpy's {@code searchsorted(side="right")}), at most the
 * last interior bin; a categorical value is its kept level's bin, the reference's other levels
 * share the next one, a value the reference never saw the last.
 *
 * <p>Runs at parallelism 1 (one counter for the stream); open panes and the history are operator
 * state, so a restored job goes on counting where its checkpoint was.
 */
public final class DriftPanes extends AbstractStreamOperator<Row> implements OneInputStreamOperator<Row, Row> {
    private static final long serialVersionUID = 1L;
    public static final String LATE = "auditflow.drift_late";
    public static final RowTypeInfo ALERT_TYPE = new RowTypeInfo(
            new TypeInformation<?>[] {Types.STRING}, new String[] {"message"});
    public static final RowTypeInfo PANE_TYPE = new RowTypeInfo(
            new TypeInformation<?>[] {Types.LONG, Types.PRIMITIVE_ARRAY(Types.BYTE)}, new String[] {"start", "panes"});
    public static final OutputTag<Row> ALERTS = new OutputTag<>("alerts", ALERT_TYPE);

    /** The layout's sizes (the same that {@code pipelines.drift.Layout} derives its offsets from)
     * and the reference's bins. */
    public static final class Params implements Serializable {
        private static final long serialVersionUID = 3L;
        public static final int NUMERIC = 0, CATEGORICAL = 1, SCORE = 2;
        public long windowMs;
        public long latenessMs;
        public int[] segmentCounts; // per dimension: kept values + 1 (other)
        public int[] nbins; // per feature
        public int[] segmentFeatures; // feature indices scored within segments
        public int history;
        public int tsField;
        public int offsetField;
        public int maxGapPanes;
        public int[] segmentFields; // per dimension: its af1 field
        public String[] segmentValues; // per dimension its kept values, in order (flat; segmentValueEnds)
        public int[] segmentValueEnds;
        public int[] featureKind; // per feature: NUMERIC, CATEGORICAL or SCORE
        public int[] featureSource; // NUMERIC: its column in the packed features; CATEGORICAL: its af1 field
        public double[] edges; // NUMERIC features' and the SCORE's edges (flat; edgeEnds)
        public int[] edgeEnds;
        public String[] levelValues; // CATEGORICAL features' (value, bin) pairs (flat; levelEnds)
        public int[] levelBins;
        public int[] levelEnds;

        public Params(long windowMs, long latenessMs, int[] segmentCounts, int[] nbins, int[] segmentFeatures,
                      int history, int tsField, int offsetField, int maxGapPanes) {
            this.windowMs = windowMs;
            this.latenessMs = latenessMs;
            this.segmentCounts = segmentCounts;
            this.nbins = nbins;
            this.segmentFeatures = segmentFeatures;
            this.history = history;
            this.tsField = tsField;
            this.offsetField = offsetField;
            this.maxGapPanes = maxGapPanes;
        }

        /** The reference's bins (see the class comment); without them the operator cannot bin. */
        public Params bins(int[] segmentFields, String[] segmentValues, int[] segmentValueEnds, int[] featureKind,
                           int[] featureSource, double[] edges, int[] edgeEnds, String[] levelValues,
                           int[] levelBins, int[] levelEnds) {
            this.segmentFields = segmentFields;
            this.segmentValues = segmentValues;
            this.segmentValueEnds = segmentValueEnds;
            this.featureKind = featureKind;
            this.featureSource = featureSource;
            this.edges = edges;
            this.edgeEnds = edgeEnds;
            this.levelValues = levelValues;
            this.levelBins = levelBins;
            this.levelEnds = levelEnds;
            return this;
        }

        /** Fails unless the bins ({@link #bins}) were given and match the layout's sizes. */
        void checkBins(String who) {
            if (featureKind == null || featureKind.length != nbins.length || segmentFields.length != segmentCounts.length) {
                throw new IllegalArgumentException(who + ": the reference's bins do not match the layout");
            }
        }
    }

    private static final class Acc {
        final long start;
        final long[] counts;
        long events;
        long first = Long.MAX_VALUE, last = Long.MIN_VALUE;

        Acc(long start, int size) {
            this.start = start;
            this.counts = new long[size];
        }
    }

    private final Params p;
    private transient int[] allOffsets, segOffsets, dimBases;
    private transient int stride, size, nDims, nFeatures;
    private transient int[] bins, segs;
    private transient TreeMap<Long, Acc> open;
    private transient ArrayDeque<Acc> history;
    private transient long lastEmitted;
    private transient ListState<byte[]> state;
    private transient LongCounter late;

    public DriftPanes(Params p) {
        this.p = p;
    }

    /** The counter over {@code scored} ({@code codes, r(s, m)}); the alerts are its {@link #ALERTS} side output. */
    public static SingleOutputStreamOperator<Row> build(DataStream<Row> scored, Params p) {
        return scored.transform("drift-panes (bin counts per pane)", PANE_TYPE, new DriftPanes(p))
                .setParallelism(1).setMaxParallelism(1);
    }

    private void layout() {
        nDims = p.segmentCounts.length;
        int f = p.nbins.length;
        nFeatures = f;
        p.checkBins("drift panes");
        bins = new int[f];
        segs = new int[nDims];
        allOffsets = new int[f];
        int o = 0;
        for (int i = 0; i < f; i++) {
            allOffsets[i] = o;
            o += p.nbins[i];
        }
        segOffsets = new int[p.segmentFeatures.length];
        stride = 0;
        for (int k = 0; k < p.segmentFeatures.length; k++) {
            segOffsets[k] = stride;
            stride += p.nbins[p.segmentFeatures[k]];
        }
        dimBases = new int[nDims];
        for (int d = 0; d < nDims; d++) {
            dimBases[d] = o;
            o += p.segmentCounts[d] * stride;
        }
        size = o;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        layout();
        open = new TreeMap<>();
        history = new ArrayDeque<>();
        lastEmitted = Long.MIN_VALUE;
        state = context.getOperatorStateStore().getListState(
                new ListStateDescriptor<>("drift-panes",
                        org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
        if (context.isRestored()) {
            for (byte[] blob : state.get()) restore(blob);
        }
    }

    @Override
    public void open() throws Exception {
        super.open();
        late = new LongCounter();
        getRuntimeContext().addAccumulator(LATE, late);
    }

    @Override
    public void processElement(StreamRecord<Row> element) throws Exception {
        Row row = element.getValue();
        byte[] codes = (byte[]) row.getField(0);
        Row r = (Row) row.getField(1);
        Object message = r.getField(1);
        // a NaN score arrives as NULL (Arrow's conversion masks NaN): it bins as NaN, in the overflow bin
        Object s = r.getField(0);
        double score = s == null ? Double.NaN : (Double) s;
        if (message != null) {
            output.collect(ALERTS, new StreamRecord<>(Row.of(message), element.getTimestamp()));
        }
        long ts = (long) LE_LONG.get(codes, 0);
        long off = (long) LE_LONG.get(codes, 8);
        long start = Math.floorDiv(ts, p.windowMs) * p.windowMs;
        if (fireAt(start) <= currentWatermark() || start <= lastEmitted) {
            late.add(1); // cannot happen: late records are split off before the account operators
            return;
        }
        for (int d = 0; d < nDims; d++) segs[d] = (char) LE_CHAR.get(codes, 16 + 2 * d);
        int at = 16 + 2 * nDims;
        for (int i = 0; i < nFeatures; i++) {
            bins[i] = p.featureKind[i] == Params.SCORE
                    ? binIndex(p.edges, i == 0 ? 0 : p.edgeEnds[i - 1], p.edgeEnds[i], score)
                    : (char) LE_CHAR.get(codes, at + 2 * i);
            if (bins[i] < 0 || bins[i] >= p.nbins[i]) {
                throw new IllegalStateException("drift panes: bin " + bins[i] + " of feature " + i + " outside 0.."
                        + (p.nbins[i] - 1));
            }
        }
        Acc a = open.get(start);
        if (a == null) {
            a = new Acc(start, size);
            open.put(start, a);
        }
        a.events++;
        a.first = Math.min(a.first, off);
        a.last = Math.max(a.last, off);
        long[] c = a.counts;
        for (int i = 0; i < nFeatures; i++) c[allOffsets[i] + bins[i]]++;
        for (int d = 0; d < nDims; d++) {
            int base = dimBases[d] + segs[d] * stride;
            for (int k = 0; k < p.segmentFeatures.length; k++) {
                c[base + segOffsets[k] + bins[p.segmentFeatures[k]]]++;
            }
        }
    }

    private static final java.lang.invoke.VarHandle LE_LONG =
            java.lang.invoke.MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final java.lang.invoke.VarHandle LE_CHAR =
            java.lang.invoke.MethodHandles.byteArrayViewVarHandle(char[].class, ByteOrder.LITTLE_ENDIAN);
    private static final java.lang.invoke.VarHandle LE_DOUBLE =
            java.lang.invoke.MethodHandles.byteArrayViewVarHandle(double[].class, ByteOrder.LITTLE_ENDIAN);

    /**
     * Bins each event where its features are computed, before the fast path: the feature rows
     * {@code eid, payload, features} get a fourth column {@code codes BYTES}, little-endian: the
     * event time (ms) and source offset as longs, then per segment dimension its value's index
     * (kept values in order, the last for any other), then per feature its bin (0 for the score,
     * which the counter bins from the fast path's result), each an unsigned 16-bit integer. Only these bytes and the
     * fast path's result travel on to the counter, not the payload and the packed features.
     *
     * <p>Of the watermarks (one after every event at the source) it passes on the first that
     * lets the counter close a pane, then none until the next pane can close, and the last: the
     * counter closes the same panes after the same events, without a watermark per event through
     * the fast path's Python stage behind it.
     */
    public static final class Codes extends AbstractStreamOperator<Row> implements OneInputStreamOperator<Row, Row> {
        private static final long serialVersionUID = 1L;
        public static final RowTypeInfo TYPE = new RowTypeInfo(
                new TypeInformation<?>[] {Types.STRING, Types.STRING, Types.PRIMITIVE_ARRAY(Types.BYTE),
                        Types.PRIMITIVE_ARRAY(Types.BYTE)},
                new String[] {"eid", "payload", "features", "codes"});
        private final Params p;
        private transient ValueIndex[] segmentIndex, levelIndex;
        private transient int[] commas;
        private transient int[] fieldHash; // this event's af1 fields' String.hashCode, each computed once
        private transient boolean[] hashed;
        private transient int nDims, nFeatures;

        public Codes(Params p) {
            this.p = p;
        }

        /** The feature rows with their codes (chained to the operator that makes them). */
        public static SingleOutputStreamOperator<Row> build(DataStream<Row> features, Params p) {
            return features.transform("drift bins per event", TYPE, new Codes(p)).setParallelism(features.getParallelism());
        }

        private transient long panesClosable; // how many panes the last watermark passed on lets close

        @Override
        public void open() throws Exception {
            super.open();
            panesClosable = Long.MIN_VALUE; // a transient field's initializer does not run after deserialization
        }

        @Override
        public void processElement(StreamRecord<Row> element) throws Exception {
            Row r = map(element.getValue());
            // Stamped with the event's time: the table made from these rows declares a rowtime (for
            // its watermarks), and the join before this emits a row with the timestamp of whichever
            // part came last, which has none when it is the event itself.
            output.collect(element.replace(r, (long) LE_LONG.get((byte[]) r.getField(3), 0)));
        }

        @Override
        public void processWatermark(Watermark mark) throws Exception {
            long t = mark.getTimestamp();
            // the counter closes pane [s, s + w) once the watermark reaches s + w - 1 + lateness
            long closable = t == Long.MAX_VALUE ? Long.MAX_VALUE
                    : t < Long.MIN_VALUE / 2 ? Long.MIN_VALUE + 1 // no pane closes yet (and no overflow)
                    : Math.floorDiv(t + 1 - p.latenessMs, p.windowMs);
            if (closable > panesClosable) {
                panesClosable = closable;
                super.processWatermark(mark);
            }
        }

        private void setUp() {
            nDims = p.segmentCounts.length;
            nFeatures = p.nbins.length;
            p.checkBins("drift bins");
            for (int n : p.nbins) {
                if (n > 65536) throw new IllegalArgumentException("drift bins: " + n + " bins in one feature (at most 65536)");
            }
            for (int n : p.segmentCounts) {
                if (n > 65536) throw new IllegalArgumentException("drift bins: " + n + " segments in one dimension (at most 65536)");
            }
            int maxField = Math.max(p.tsField, p.offsetField);
            segmentIndex = new ValueIndex[nDims];
            for (int d = 0, from = 0; d < nDims; d++) {
                HashMap<String, Integer> m = new HashMap<>();
                for (int i = from; i < p.segmentValueEnds[d]; i++) m.put(p.segmentValues[i], i - from);
                segmentIndex[d] = new ValueIndex(m);
                from = p.segmentValueEnds[d];
                maxField = Math.max(maxField, p.segmentFields[d]);
            }
            levelIndex = new ValueIndex[nFeatures];
            for (int i = 0, from = 0; i < nFeatures; i++) {
                if (p.featureKind[i] == Params.CATEGORICAL) {
                    HashMap<String, Integer> m = new HashMap<>();
                    for (int j = from; j < p.levelEnds[i]; j++) m.put(p.levelValues[j], p.levelBins[j]);
                    levelIndex[i] = new ValueIndex(m);
                    maxField = Math.max(maxField, p.featureSource[i]);
                }
                from = p.levelEnds[i];
            }
            commas = new int[maxField + 2];
            fieldHash = new int[maxField + 1];
            hashed = new boolean[maxField + 1];
        }

        /** The feature row with its codes. */
        public Row map(Row row) {
            if (commas == null) setUp();
            String payload = (String) row.getField(1);
            byte[] packed = (byte[]) row.getField(2);
            fieldBounds(payload);
            java.util.Arrays.fill(hashed, false);
            byte[] codes = new byte[16 + 2 * (nDims + nFeatures)];
            LE_LONG.set(codes, 0, Long.parseLong(payload, commas[p.tsField] + 1, commas[p.tsField + 1], 10));
            LE_LONG.set(codes, 8, Long.parseLong(payload, commas[p.offsetField] + 1, commas[p.offsetField + 1], 10));
            for (int d = 0; d < nDims; d++) {
                int s = lookUp(segmentIndex[d], payload, p.segmentFields[d]);
                LE_CHAR.set(codes, 16 + 2 * d, (char) (s < 0 ? p.segmentCounts[d] - 1 : s));
            }
            int at = 16 + 2 * nDims;
            for (int i = 0; i < nFeatures; i++) {
                int bin;
                switch (p.featureKind[i]) {
                    case Params.NUMERIC:
                        bin = binIndex(p.edges, i == 0 ? 0 : p.edgeEnds[i - 1], p.edgeEnds[i],
                                (double) LE_DOUBLE.get(packed, 8 * p.featureSource[i]));
                        break;
                    case Params.CATEGORICAL: {
                        int b = lookUp(levelIndex[i], payload, p.featureSource[i]);
                        bin = b < 0 ? p.nbins[i] - 1 : b;
                        break;
                    }
                    default:
                        bin = 0; // the score: binned by the counter, from the fast path's result
                }
                LE_CHAR.set(codes, at + 2 * i, (char) bin);
            }
            return Row.of(row.getField(0), payload, packed, codes);
        }

        /** {@code commas[i]}: the index of the comma before field i (-1 for the first), up to maxField + 1. */
        private void fieldBounds(String s) {
            commas[0] = -1;
            int at = -1;
            for (int i = 1; i < commas.length; i++) {
                if (at < s.length()) {
                    int next = s.indexOf(',', at + 1);
                    at = next < 0 ? s.length() : next;
                }
                commas[i] = at;
            }
        }

        /** The code {@code index} gives the value of the af1 record's field {@code field}, -1 if none. */
        private int lookUp(ValueIndex index, String s, int field) {
            int from = commas[field] + 1, to = commas[field + 1];
            if (!hashed[field]) {
                int h = 0;
                for (int k = from; k < to; k++) h = 31 * h + s.charAt(k); // String.hashCode of the field
                fieldHash[field] = h;
                hashed[field] = true;
            }
            return index.get(s, from, to, fieldHash[field]);
        }
    }

    /**
     * A map of strings to codes looked up by a region of another string (an af1 record's field)
     * and its {@code String.hashCode}, without cutting the field out: open addressing, the
     * region compared with {@code regionMatches}.
     */
    static final class ValueIndex {
        private final String[] keys;
        private final int[] hashes, codes;
        private final int mask;

        ValueIndex(Map<String, Integer> m) {
            int size = Integer.highestOneBit(Math.max(2, m.size()) * 4 - 1);
            keys = new String[size];
            hashes = new int[size];
            codes = new int[size];
            mask = size - 1;
            for (Map.Entry<String, Integer> e : m.entrySet()) {
                int h = e.getKey().hashCode();
                int i = spread(h) & mask;
                while (keys[i] != null) i = (i + 1) & mask;
                keys[i] = e.getKey();
                hashes[i] = h;
                codes[i] = e.getValue();
            }
        }

        private static int spread(int h) {
            return h ^ (h >>> 16);
        }

        /** The code of {@code s[from..to)} (its hashCode {@code h}), -1 if none. */
        int get(String s, int from, int to, int h) {
            int len = to - from;
            for (int i = spread(h) & mask; keys[i] != null; i = (i + 1) & mask) {
                String k = keys[i];
                if (hashes[i] == h && k.length() == len && s.regionMatches(from, k, 0, len)) return codes[i];
            }
            return -1;
        }
    }

    /** {@code pipelines.drift.bin_index} over {@code e[from..to)}. */
    static int binIndex(double[] e, int from, int to, double v) {
        int len = to - from;
        int interior = Math.max(1, len - 1);
        if (!Double.isFinite(v) || v > e[to - 1]) return interior + 1;
        if (v < e[from]) return 0;
        int lo = 0, hi = len; // the number of edges <= v
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (e[from + mid] <= v) lo = mid + 1;
            else hi = mid;
        }
        return Math.min(lo, interior);
    }

    private long currentWatermark = Long.MIN_VALUE;

    private long currentWatermark() {
        return currentWatermark;
    }

    private long fireAt(long start) {
        return start + p.windowMs - 1 + p.latenessMs;
    }

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        currentWatermark = Math.max(currentWatermark, mark.getTimestamp());
        Iterator<Map.Entry<Long, Acc>> it = open.entrySet().iterator();
        while (it.hasNext()) {
            Acc a = it.next().getValue();
            if (fireAt(a.start) > currentWatermark) break;
            it.remove();
            if (lastEmitted != Long.MIN_VALUE) {
                long gap = (a.start - lastEmitted) / p.windowMs - 1;
                if (gap > p.maxGapPanes) {
                    history.clear(); // not consecutive windows: rules start over
                } else {
                    for (long s = lastEmitted + p.windowMs; s < a.start; s += p.windowMs) emit(new Acc(s, size));
                }
            }
            emit(a);
        }
        super.processWatermark(mark);
    }

    private void emit(Acc a) {
        ByteBuffer buf = ByteBuffer.allocate(8 * (4 + size) * (history.size() + 1)).order(ByteOrder.LITTLE_ENDIAN);
        for (Acc h : history) put(buf, h);
        put(buf, a);
        output.collect(new StreamRecord<>(Row.of(a.start, buf.array())));
        history.addLast(a);
        while (history.size() > p.history) history.removeFirst();
        lastEmitted = a.start;
    }

    private void put(ByteBuffer buf, Acc a) {
        buf.putLong(a.start).putLong(a.events).putLong(a.first).putLong(a.last);
        for (long x : a.counts) buf.putLong(x);
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        int n = open.size() + history.size();
        ByteBuffer buf = ByteBuffer.allocate(8 * (4 + n * (5 + size))).order(ByteOrder.LITTLE_ENDIAN);
        buf.putLong(1L).putLong(lastEmitted).putLong(currentWatermark).putLong(n);
        for (Acc a : history) {
            buf.putLong(1L);
            put(buf, a);
        }
        for (Acc a : open.values()) {
            buf.putLong(0L);
            put(buf, a);
        }
        state.update(java.util.List.of(buf.array()));
    }

    private void restore(byte[] blob) {
        ByteBuffer buf = ByteBuffer.wrap(blob).order(ByteOrder.LITTLE_ENDIAN);
        long version = buf.getLong();
        if (version != 1L) throw new IllegalStateException("drift pane state of version " + version);
        lastEmitted = buf.getLong();
        currentWatermark = buf.getLong();
        long n = buf.getLong();
        for (long i = 0; i < n; i++) {
            boolean emitted = buf.getLong() == 1L;
            Acc a = new Acc(buf.getLong(), size);
            a.events = buf.getLong();
            a.first = buf.getLong();
            a.last = buf.getLong();
            for (int k = 0; k < size; k++) a.counts[k] = buf.getLong();
            if (emitted) history.addLast(a);
            else open.put(a.start, a);
        }
    }
}
