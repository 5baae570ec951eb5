package io.auditflow.stream;

import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * The drift scorer's rows {@code (kind STRING, lines STRING)}, one per pane and kind, split into
 * one row {@code (kind, message)} per line (at {@code '\n'}; none for a NULL or empty string).
 * One row per pane crosses from Python, instead of one per record.
 *
 * <p>A DataStream operator, not a SQL table function: a lateral join's output row carries its
 * input row's columns, so each line's row would hold (and, between chained operators, copy) the
 * whole pane's string; here only the line travels on.
 */
public final class SplitLines implements FlatMapFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    public static final RowTypeInfo LINE_TYPE = new RowTypeInfo(
            new TypeInformation<?>[] {Types.STRING, Types.STRING}, new String[] {"kind", "message"});

    public static SingleOutputStreamOperator<Row> build(DataStream<Row> rows) {
        return rows.flatMap(new SplitLines(), LINE_TYPE).name("drift records, one row per line")
                .setParallelism(rows.getParallelism());
    }

    @Override
    public void flatMap(Row row, Collector<Row> out) {
        String kind = (String) row.getField(0), s = (String) row.getField(1);
        if (s == null || s.isEmpty()) return;
        int from = 0;
        while (true) {
            int at = s.indexOf('\n', from);
            if (at < 0) {
                out.collect(Row.of(kind, s.substring(from)));
                return;
            }
            out.collect(Row.of(kind, s.substring(from, at)));
            from = at + 1;
        }
    }
}
