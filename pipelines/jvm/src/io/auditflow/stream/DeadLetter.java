package io.auditflow.stream;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Base64;

/**
 * A dead letter's raw columns, capped like {@code auditflow.records.RejectedRecord}: at most
 * {@link #MAX_RAW_BYTES} bytes of the record (its text cut on a whole character, or the base64
 * of its bytes when they are not UTF-8), with the whole record's length in bytes and SHA-256; a
 * field value cut to {@link #MAX_VALUE_CHARS} characters. So a dead letter stays a few KiB
 * whatever the record (Kafka refuses a request over 1 MiB, which would fail the job).
 */
final class DeadLetter {
    /** auditflow.records.MAX_RAW_BYTES, MAX_VALUE_CHARS. */
    static final int MAX_RAW_BYTES = 4096;
    static final int MAX_VALUE_CHARS = 200;

    private DeadLetter() {}

    /** The record's text, or null if its bytes are not UTF-8 (a U+FFFD in the text is checked strictly). */
    static String text(byte[] b) {
        String s = new String(b, StandardCharsets.UTF_8);
        return s.indexOf('\uFFFD') < 0 || invalidAt(b) < 0 ? s : null;
    }

    /** The byte offset of the first byte that is not UTF-8, or -1 if all are. */
    static int invalidAt(byte[] b) {
        CharsetDecoder dec = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);
        ByteBuffer in = ByteBuffer.wrap(b);
        CharBuffer out = CharBuffer.allocate(Math.max(16, Math.min(b.length, 1 << 16)));
        while (true) {
            CoderResult r = dec.decode(in, out, true);
            if (r.isError()) return in.position();
            if (r.isOverflow()) {
                out.clear();
                continue;
            }
            r = dec.flush(out);
            if (r.isOverflow()) {
                out.clear();
                continue;
            }
            return -1;
        }
    }

    /** {@code raw, raw_length, raw_sha256, raw_encoding} of a record's bytes. */
    static Object[] raw(byte[] b, boolean utf8) {
        String raw;
        if (utf8) {
            int cut = Math.min(b.length, MAX_RAW_BYTES);
            while (cut < b.length && cut > 0 && (b[cut] & 0xC0) == 0x80) cut--; // back to a character's start
            raw = new String(b, 0, cut, StandardCharsets.UTF_8);
        } else {
            raw = Base64.getEncoder().encodeToString(b.length <= MAX_RAW_BYTES ? b : java.util.Arrays.copyOf(b, MAX_RAW_BYTES));
        }
        return new Object[] {raw, (long) b.length, sha256Hex(b), utf8 ? "utf-8" : "base64"};
    }

    /** At most {@code n} characters (code points) of {@code s}: the first n - 3 and "..." if longer. */
    static String cut(String s, int n) {
        if (s.length() <= n || s.codePointCount(0, s.length()) <= n) return s;
        return s.substring(0, s.offsetByCodePoints(0, n - 3)) + "...";
    }

    static String sha256Hex(byte[] b) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(b);
            StringBuilder sb = new StringBuilder(64);
            for (byte x : d) sb.append(Character.forDigit((x >> 4) & 0xF, 16)).append(Character.forDigit(x & 0xF, 16));
            return sb.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
