package io.auditflow.stream;

import org.apache.flink.table.annotation.DataTypeHint;
import org.apache.flink.table.annotation.FunctionHint;
import org.apache.flink.table.functions.TableFunction;
import org.apache.flink.types.Row;

/**
 * {@code af_split_lines(s)}: one row per line of {@code s} (split at {@code '\n'}; no row for a
 * NULL or empty string). The drift scorer returns a pane's records as one string of JSON lines,
 * one row per pane crossing from Python instead of one per record.
 */
@FunctionHint(output = @DataTypeHint("ROW<message STRING>"))
public final class SplitLines extends TableFunction<Row> {
    private static final long serialVersionUID = 1L;

    public void eval(String s) {
        if (s == null || s.isEmpty()) return;
        int from = 0;
        while (true) {
            int at = s.indexOf('\n', from);
            if (at < 0) {
                collect(Row.of(s.substring(from)));
                return;
            }
            collect(Row.of(s.substring(from, at)));
            from = at + 1;
        }
    }
}
