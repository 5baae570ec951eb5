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
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;

/**
 * Drift counting in the JVM: per tumbling event-time pane, the bin counts of every (segment,
 * feature) block of the reference's flat layout ({@code pipelines.drift.Layout}), from the codes
 * the fast path's batched UDF puts in front of each scored row.
 *
 * <p>Input rows: {@code payload STRING} (the af1 wire record: event time, source offset) and
 * {@code r STRING}: the event's codes (one character each, code + {@link Params#codeBase}: per
 * segment dimension its segment index, then per feature its bin), then the alert message when the
 * event alerts. Alert messages go to {@link #ALERTS}; the main output is one row per pane,
 * {@code start BIGINT, panes BYTES}, emitted once the watermark has passed the pane's end plus the
 * allowed lateness (every event of the pane is then counted: the feature rows of an event come
 * out of the account operators when the watermark passes its time plus the lateness). {@code
 * panes} holds that pane and up to {@link Params#history} panes before it (for alert rules over
 * consecutive windows), oldest first, each as little-endian longs: start, events, first source
 * offset, last source offset, then the counts. Panes without events between two that have some
 * are emitted too (all counts 0).
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

    /** The layout's sizes (the same that {@code pipelines.drift.Layout} derives its offsets from). */
    public static final class Params implements Serializable {
        private static final long serialVersionUID = 1L;
        public long windowMs;
        public long latenessMs;
        public int[] segmentCounts; // per dimension: kept values + 1 (other)
        public int[] nbins; // per feature
        public int[] segmentFeatures; // feature indices scored within segments
        public int history;
        public int codeBase;
        public int tsField;
        public int offsetField;
        public int maxGapPanes;

        public Params(long windowMs, long latenessMs, int[] segmentCounts, int[] nbins, int[] segmentFeatures,
                      int history, int codeBase, int tsField, int offsetField, int maxGapPanes) {
            this.windowMs = windowMs;
            this.latenessMs = latenessMs;
            this.segmentCounts = segmentCounts;
            this.nbins = nbins;
            this.segmentFeatures = segmentFeatures;
            this.history = history;
            this.codeBase = codeBase;
            this.tsField = tsField;
            this.offsetField = offsetField;
            this.maxGapPanes = maxGapPanes;
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
    private transient int stride, size, nDims, codeLen;
    private transient TreeMap<Long, Acc> open;
    private transient ArrayDeque<Acc> history;
    private transient long lastEmitted;
    private transient ListState<byte[]> state;
    private transient LongCounter late;

    public DriftPanes(Params p) {
        this.p = p;
    }

    /** The counter over {@code scored} ({@code payload, r}); the alerts are its {@link #ALERTS} side output. */
    public static SingleOutputStreamOperator<Row> build(DataStream<Row> scored, Params p) {
        return scored.transform("drift-panes (bin counts per pane)", PANE_TYPE, new DriftPanes(p))
                .setParallelism(1).setMaxParallelism(1);
    }

    private void layout() {
        nDims = p.segmentCounts.length;
        int f = p.nbins.length;
        codeLen = nDims + f;
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
        String payload = (String) row.getField(0);
        String r = (String) row.getField(1);
        if (r.length() > codeLen) {
            output.collect(ALERTS, new StreamRecord<>(Row.of(r.substring(codeLen)), element.getTimestamp()));
        }
        long ts = wireLong(payload, p.tsField), off = wireLong(payload, p.offsetField);
        long start = Math.floorDiv(ts, p.windowMs) * p.windowMs;
        if (fireAt(start) <= currentWatermark() || start <= lastEmitted) {
            late.add(1); // cannot happen: late records are split off before the account operators
            return;
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
        int b = codeLen - p.nbins.length;
        for (int i = 0; i < p.nbins.length; i++) {
            c[allOffsets[i] + r.charAt(b + i) - p.codeBase]++;
        }
        for (int d = 0; d < nDims; d++) {
            int base = dimBases[d] + (r.charAt(d) - p.codeBase) * stride;
            for (int k = 0; k < p.segmentFeatures.length; k++) {
                c[base + segOffsets[k] + r.charAt(b + p.segmentFeatures[k]) - p.codeBase]++;
            }
        }
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

    /** Field {@code index} of a comma-separated af1 record, as a long (the fields are digits). */
    static long wireLong(String s, int index) {
        int start = 0;
        for (int i = 0; i < index; i++) start = s.indexOf(',', start) + 1;
        int end = s.indexOf(',', start);
        return Long.parseLong(end < 0 ? s.substring(start) : s.substring(start, end));
    }
}
