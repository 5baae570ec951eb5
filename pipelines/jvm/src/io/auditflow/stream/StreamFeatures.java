package io.auditflow.stream;

import org.apache.flink.api.common.accumulators.LongCounter;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedCoProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;

/**
 * The stream job's per-event work in the JVM: de-duplication by event id, both legs of each
 * transfer through one keyed operator per account that keeps all windows in shared state, and
 * the legs joined back to their event. Python builds the job (SQL around this) and scores the
 * joined rows in Arrow batches.
 *
 * <p>Input rows (from SQL): {@code eid STRING, ts BIGINT (event time, epoch ms), offset BIGINT, snd STRING,
 * rcv STRING, paid_cents BIGINT, recv_cents BIGINT, payload STRING}, with event time and
 * watermarks. Output rows: {@code eid, payload} then the packed features: the event's, the
 * sender's and the receiver's account features, and the record's arrival at the job (DOUBLE each). Records whose event id was already seen go to {@link #DUPLICATES}.
 */
public final class StreamFeatures {
    private StreamFeatures() {}

    public static final int EID = 0, TS = 1, OFFSET = 2, SND = 3, RCV = 4, PAID = 5, RECV = 6, PAYLOAD = 7,
            EVENT_FEATURES = 8;
    /** Event-level features (auditflow.features.EVENT_FEATURES), computed by {@link Decode}; the
     * array holds one more value after them: the record's arrival at the job (epoch ms). */
    public static final int N_EVENT_FEATURES = 6;
    public static final String PROCESSED = "auditflow.processed";
    public static final String DUPLICATE = "auditflow.duplicate";
    /** Events before {@link Params#scoreFromMs}: they warm the accounts' state, nothing more. */
    public static final String WARMUP = "auditflow.warmup";

    static final RowTypeInfo INPUT = new RowTypeInfo(
            new TypeInformation<?>[] {Types.STRING, Types.LONG, Types.LONG, Types.STRING, Types.STRING, Types.LONG,
                Types.LONG, Types.STRING, Types.PRIMITIVE_ARRAY(Types.DOUBLE)},
            new String[] {"eid", "ts", "offset", "snd", "rcv", "paid_cents", "recv_cents", "payload", "ev"});
    /** What the job reads: the record, where it came from and (as the stream's timestamp) its event time. */
    static final RowTypeInfo RECORDS = new RowTypeInfo(
            new TypeInformation<?>[] {Types.PRIMITIVE_ARRAY(Types.BYTE), Types.STRING, Types.LONG, Types.STRING, Types.INT},
            new String[] {"value", "src", "off", "topic", "part"});
    /** A reject: where from, its raw columns (DeadLetter.raw), and the field, value and reason. */
    static final RowTypeInfo REJECT_TYPE = new RowTypeInfo(
            new TypeInformation<?>[] {Types.STRING, Types.LONG, Types.STRING, Types.INT, Types.STRING, Types.LONG,
                Types.STRING, Types.STRING, Types.STRING, Types.STRING, Types.STRING},
            new String[] {"src", "off", "topic", "part", "raw", "raw_length", "raw_sha256", "raw_encoding", "field",
                "value", "reason"});
    /** A late record (a valid af1 record, so {@code raw} is all of it): as a reject, with the watermark. */
    static final RowTypeInfo LATE_TYPE = new RowTypeInfo(
            new TypeInformation<?>[] {Types.STRING, Types.LONG, Types.STRING, Types.INT, Types.STRING, Types.LONG,
                Types.STRING, Types.STRING, Types.STRING, Types.LONG},
            new String[] {"src", "off", "topic", "part", "raw", "raw_length", "raw_sha256", "raw_encoding", "value",
                "watermark"});
    static final RowTypeInfo PAYLOAD_TYPE = new RowTypeInfo(
            new TypeInformation<?>[] {Types.STRING}, new String[] {"payload"});

    public static final OutputTag<Row> DUPLICATES = new OutputTag<>("duplicates", INPUT);
    public static final OutputTag<Row> REJECTS = new OutputTag<>("rejects", REJECT_TYPE);
    public static final OutputTag<Row> LATE = new OutputTag<>("late", LATE_TYPE);

    /** What a job needs to know: windows (minutes, shortest first), caps, and the allowed lateness. */
    public static final class Params implements Serializable {
        private static final long serialVersionUID = 1L;
        public long[] windows;
        public int maxLegs;
        public int recentLegs;
        public int cpWindow;
        public long latenessMs;
        /** Events earlier than this (epoch ms) are a warm-up: they go into the accounts' windows
         * but are not emitted (no features row, no graph write), counted as {@link #WARMUP}. */
        public long scoreFromMs = Long.MIN_VALUE;

        public Params(long[] windows, int maxLegs, int recentLegs, int cpWindow, long latenessMs) {
            this.windows = windows;
            this.maxLegs = maxLegs;
            this.recentLegs = recentLegs;
            this.cpWindow = cpWindow;
            this.latenessMs = latenessMs;
        }

        /** This job's warm-up ends at {@code ms} (see {@link #scoreFromMs}). */
        public Params scoreFrom(long ms) {
            this.scoreFromMs = ms;
            return this;
        }

        AccountWindow newWindow() {
            return new AccountWindow(windows, maxLegs, recentLegs, cpWindow);
        }
    }

    /** The two streams a job gets back. */
    public static final class Result {
        public final DataStream<Row> features;
        public final DataStream<Row> duplicates;
        public final DataStream<Row> rejects;
        public final DataStream<Row> late;
        public final DataStream<Row> graphEvents;

        Result(DataStream<Row> features, DataStream<Row> duplicates, DataStream<Row> rejects, DataStream<Row> late,
               DataStream<Row> graphEvents) {
            this.features = features;
            this.duplicates = duplicates;
            this.rejects = rejects;
            this.late = late;
            this.graphEvents = graphEvents;
        }

        public DataStream<Row> getRejects() {
            return rejects;
        }

        public DataStream<Row> getLate() {
            return late;
        }

        /** Every decoded event once (on time after de-duplication, and late), as its wire payload. */
        public DataStream<Row> getGraphEvents() {
            return graphEvents;
        }

        public DataStream<Row> getFeatures() {
            return features;
        }

        public DataStream<Row> getDuplicates() {
            return duplicates;
        }
    }

    /**
     * The job over {@code records} ({@link #RECORDS}, with event time): decode, split off rejects
     * and late records, de-duplicate, account features, join. Output rows: {@code eid, payload,
     * features} where {@code features} packs the event's {@code N_EVENT_FEATURES} event features,
     * then the sender's and the receiver's account features, as little-endian doubles.
     */
    public static Result build(DataStream<Row> records, Params p, String[] wireNames, String[] currencies,
                               long[] roundUnits, String[] formats) {
        int perSide = AccountWindow.featureCount(p.windows.length);
        DataStream<Row> typed = records.map(r -> r).returns(RECORDS).name("records");
        SingleOutputStreamOperator<Row> decoded = typed
                .process(new Decode(wireNames, currencies, roundUnits, formats, p.latenessMs))
                .returns(INPUT).name("decode (af1) and split off late records");
        SingleOutputStreamOperator<Row> unique = decoded
                .keyBy(r -> (String) r.getField(EID), Types.STRING)
                .process(new Dedup(p.latenessMs)).returns(INPUT).name("dedup-by-event-id");
        DataStream<Leg> legs = unique.flatMap(Leg::split, Types.POJO(Leg.class)).name("legs");
        DataStream<LegFeatures> legFeatures = legs
                .keyBy(l -> l.account, Types.STRING)
                .process(new AccountFeatures(p))
                .returns(Types.POJO(LegFeatures.class))
                .name("account-features (all windows, shared state)");
        RowTypeInfo outType = new RowTypeInfo(
                new TypeInformation<?>[] {Types.STRING, Types.STRING, Types.PRIMITIVE_ARRAY(Types.BYTE)},
                new String[] {"eid", "payload", "features"});
        DataStream<Row> joined = unique
                .keyBy(r -> (String) r.getField(EID), Types.STRING)
                .connect(legFeatures.keyBy(f -> f.eid, Types.STRING))
                .process(new JoinLegs(perSide, p.scoreFromMs))
                .returns(outType)
                .name("join-legs");
        DataStream<Row> late = decoded.getSideOutput(LATE);
        long scoreFrom = p.scoreFromMs;
        DataStream<Row> graphEvents = unique.filter(r -> (Long) r.getField(TS) >= scoreFrom)
                .map(r -> Row.of(r.getField(PAYLOAD))).returns(PAYLOAD_TYPE)
                .union(late.map(r -> Row.of(r.getField(4))).returns(PAYLOAD_TYPE));
        return new Result(joined, unique.getSideOutput(DUPLICATES), decoded.getSideOutput(REJECTS), late, graphEvents);
    }

    // ------------------------------------------------------------------------------ records

    /** One leg of a transfer, at one account. */
    public static final class Leg {
        public String account;
        public long ts;
        public long offset;
        public String eid;
        public boolean out;
        public String counterparty;
        public long cents;

        public Leg() {}

        static void split(Row r, Collector<Leg> out) {
            String eid = (String) r.getField(EID);
            long ts = (Long) r.getField(TS), offset = (Long) r.getField(OFFSET);
            String snd = (String) r.getField(SND), rcv = (String) r.getField(RCV);
            out.collect(leg(snd, ts, offset, eid, true, rcv, (Long) r.getField(PAID)));
            out.collect(leg(rcv, ts, offset, eid, false, snd, (Long) r.getField(RECV)));
        }

        static Leg leg(String account, long ts, long offset, String eid, boolean out, String cp, long cents) {
            Leg l = new Leg();
            l.account = account;
            l.ts = ts;
            l.offset = offset;
            l.eid = eid;
            l.out = out;
            l.counterparty = cp;
            l.cents = cents;
            return l;
        }

        /** The order legs are applied in at an account: event time, source offset, event id, out before in. */
        static final Comparator<Leg> ORDER = Comparator.<Leg>comparingLong(l -> l.ts)
                .thenComparingLong(l -> l.offset)
                .thenComparing(l -> l.eid)
                .thenComparing(l -> l.out ? 0 : 1);
    }

    /** One leg's account features. */
    public static final class LegFeatures {
        public String eid;
        public boolean out;
        public double[] values;

        public LegFeatures() {}
    }

    /** An account's window plus the legs waiting for the watermark. */
    public static final class AccountState implements Serializable {
        private static final long serialVersionUID = 1L;
        public AccountWindow window;
        public ArrayList<Leg> pending = new ArrayList<>();
        public long cleanupAt = Long.MIN_VALUE;
    }

    // ------------------------------------------------------------------------------ operators

    /** Keyed by event id: the first record of an id goes on, later ones are duplicates. The id is
     * forgotten once the watermark passes its time plus the allowed lateness: a record of that
     * time arriving later is late, and is split off before it gets here. */
    static final class Dedup extends KeyedProcessFunction<String, Row, Row> {
        private final long latenessMs;
        private transient ValueState<Boolean> seen;
        private transient LongCounter duplicates;

        Dedup(long latenessMs) {
            this.latenessMs = latenessMs;
        }

        @Override
        public void open(OpenContext ctx) {
            seen = getRuntimeContext().getState(new ValueStateDescriptor<>("seen", Types.BOOLEAN));
            duplicates = getRuntimeContext().getLongCounter(DUPLICATE);
        }

        @Override
        public void processElement(Row r, Context ctx, Collector<Row> out) throws Exception {
            if (seen.value() != null) {
                duplicates.add(1);
                ctx.output(DUPLICATES, r);
                return;
            }
            seen.update(Boolean.TRUE);
            ctx.timerService().registerEventTimeTimer((Long) r.getField(TS) + latenessMs);
            out.collect(r);
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<Row> out) {
            seen.clear();
        }
    }

    /** Keyed by account: legs wait until the watermark passes their time plus the allowed
     * lateness, then are applied in {@link Leg#ORDER}, so the result does not depend on arrival
     * order. State expires when the account has been idle for the longest window. */
    static final class AccountFeatures extends KeyedProcessFunction<String, Leg, LegFeatures> {
        private final Params p;
        private final int perSide;
        private transient ValueState<AccountState> state;

        AccountFeatures(Params p) {
            this.p = p;
            this.perSide = AccountWindow.featureCount(p.windows.length);
        }

        @Override
        public void open(OpenContext ctx) {
            state = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("account", AccountStateSerializer.INSTANCE));
        }

        private long due(long ts) {
            return ts + p.latenessMs;
        }

        @Override
        public void processElement(Leg leg, Context ctx, Collector<LegFeatures> out) throws Exception {
            AccountState s = state.value();
            if (s == null) {
                s = new AccountState();
                s.window = p.newWindow();
            }
            long at = due(leg.ts);
            if (at <= ctx.timerService().currentWatermark()) {
                // cannot happen: late records are split off before the job's keyed operators
                apply(s, leg, out);
            } else {
                s.pending.add(leg);
                ctx.timerService().registerEventTimeTimer(at);
            }
            state.update(s);
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<LegFeatures> out) throws Exception {
            AccountState s = state.value();
            if (s == null) return;
            if (!s.pending.isEmpty()) {
                ArrayList<Leg> due = new ArrayList<>(), rest = new ArrayList<>();
                for (Leg l : s.pending) (due(l.ts) <= ts ? due : rest).add(l);
                s.pending = rest;
                due.sort(Leg.ORDER);
                for (Leg l : due) apply(s, l, out);
            }
            if (s.window.seen) {
                long idleAt = due((s.window.lastMinute + p.windows[p.windows.length - 1]) * 60_000L);
                if (ts >= idleAt) {
                    // idle for the longest window: the next leg would reset the window anyway
                    if (s.pending.isEmpty()) {
                        state.clear();
                        return;
                    }
                    s.window = p.newWindow();
                } else if (s.cleanupAt <= ts) {
                    s.cleanupAt = idleAt; // one cleanup timer per account at a time, always ahead
                    ctx.timerService().registerEventTimeTimer(idleAt);
                }
            }
            state.update(s);
        }

        private void apply(AccountState s, Leg l, Collector<LegFeatures> out) {
            LegFeatures f = new LegFeatures();
            f.eid = l.eid;
            f.out = l.out;
            f.values = new double[perSide];
            s.window.apply(Math.floorDiv(l.ts, 60_000L), l.out, l.counterparty, l.cents, f.values, 0);
            out.collect(f);
        }
    }

    /** Keyed by event id: waits for the event and both legs' features, then emits one row. */
    static final class JoinLegs extends KeyedCoProcessFunction<String, Row, LegFeatures, Row> {
        private final int perSide;
        private final long scoreFromMs;
        private transient ValueState<Row> event;
        private transient ValueState<LegFeatures> first, second;
        private transient LongCounter processed, warmup;

        JoinLegs(int perSide, long scoreFromMs) {
            this.perSide = perSide;
            this.scoreFromMs = scoreFromMs;
        }

        @Override
        public void open(OpenContext ctx) {
            event = getRuntimeContext().getState(new ValueStateDescriptor<>("event", INPUT));
            first = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("leg1", TypeInformation.of(LegFeatures.class)));
            second = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("leg2", TypeInformation.of(LegFeatures.class)));
            processed = getRuntimeContext().getLongCounter(PROCESSED);
            warmup = getRuntimeContext().getLongCounter(WARMUP);
        }

        @Override
        public void processElement1(Row ev, Context ctx, Collector<Row> out) throws Exception {
            event.update(ev);
            emitIfComplete(out);
        }

        @Override
        public void processElement2(LegFeatures leg, Context ctx, Collector<Row> out) throws Exception {
            if (first.value() == null) {
                first.update(leg);
            } else {
                second.update(leg);
            }
            emitIfComplete(out);
        }

        /** The three parts arrive in any order (they come through different channels). */
        private void emitIfComplete(Collector<Row> out) throws Exception {
            Row ev = event.value();
            LegFeatures a = first.value(), b = second.value();
            if (ev == null || a == null || b == null) return;
            if ((Long) ev.getField(TS) < scoreFromMs) { // a warm-up event: its legs are in the windows now
                event.clear();
                first.clear();
                second.clear();
                warmup.add(1);
                return;
            }
            LegFeatures snd = a.out ? a : b, rcv = a.out ? b : a;
            double[] evf = (double[]) ev.getField(EVENT_FEATURES);
            java.nio.ByteBuffer buf = java.nio.ByteBuffer.allocate(8 * (N_EVENT_FEATURES + 2 * perSide + 1))
                    .order(java.nio.ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < N_EVENT_FEATURES; i++) buf.putDouble(evf[i]);
            for (double x : snd.values) buf.putDouble(x);
            for (double x : rcv.values) buf.putDouble(x);
            // then its arrival at the job (epoch ms, wall clock; NaN from a state written before it was kept)
            buf.putDouble(evf.length > N_EVENT_FEATURES ? evf[N_EVENT_FEATURES] : Double.NaN);
            Row r = Row.of(ev.getField(EID), ev.getField(PAYLOAD), buf.array());
            event.clear();
            first.clear();
            second.clear();
            processed.add(1);
            out.collect(r);
        }
    }
}
