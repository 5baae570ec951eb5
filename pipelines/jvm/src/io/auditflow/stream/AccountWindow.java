package io.auditflow.stream;

import java.io.Serializable;
import java.util.Arrays;
import java.util.HashMap;

/**
 * One account's multi-scale window state: the JVM twin of {@code pipelines.features.AccountWindow}
 * (same specification, written independently; the test suite checks both agree bit for bit).
 *
 * <p>One ring of legs serves every window: the longest window owns the ring, each shorter window
 * keeps the sequence number of its first leg and expires incrementally, so a leg costs O(1)
 * amortised (plus a RECENT-element shift for the amount history). Every output is an exact
 * integer as a double or one IEEE division of two integers converted to double, so the JVM and
 * Python give identical bits.
 */
public final class AccountWindow implements Serializable {
    private static final long serialVersionUID = 1L;
    static final int OUT = 0, IN = 1;

    // configuration (the same for every account; kept here so the state is self-describing)
    final long[] windows; // minutes, shortest first; the last one is the longest
    final int maxLegs;
    final int recentLegs;
    final int cpWindow; // index of the window whose counterparty counts give cp_legs_24h
    final int nWin;

    // the ring of legs, oldest first: absolute sequence numbers [head, tail)
    long[] minute = new long[16];
    long[] cents = new long[16];
    String[] cp = new String[16];
    boolean[] out = new boolean[16];
    boolean[] wasNew = new boolean[16];
    long head, tail;

    // per window
    long[] first; // sequence number of the window's first leg
    long[][] n; // [w][dir]
    long[][] sum;
    long[] newN;
    HashMap<String, int[]>[][] cps; // [w][dir] counterparty -> live leg count

    boolean seen;
    long lastMinute, firstMinute, nLife;
    boolean[] hasLast = new boolean[2];
    long[] lastLegMinute = new long[2], lastLegCents = new long[2], lastLegSeq = new long[2];

    long[] recent; // ring of the last RECENT amounts
    long[] recentSorted;
    int recentN;
    long recentAdded;

    @SuppressWarnings("unchecked")
    public AccountWindow(long[] windows, int maxLegs, int recentLegs, int cpWindow) {
        this.windows = windows.clone();
        this.maxLegs = maxLegs;
        this.recentLegs = recentLegs;
        this.cpWindow = cpWindow;
        this.nWin = windows.length;
        first = new long[nWin];
        n = new long[nWin][2];
        sum = new long[nWin][2];
        newN = new long[nWin];
        cps = new HashMap[nWin][2];
        for (int w = 0; w < nWin; w++) {
            cps[w][0] = new HashMap<>();
            cps[w][1] = new HashMap<>();
        }
        recent = new long[recentLegs];
        recentSorted = new long[recentLegs];
    }

    /** Features per account, in {@code auditflow.features.ACCOUNT_FEATURES} order. */
    public static int featureCount(int nWin) {
        return 8 * nWin + 13;
    }

    private void reset() {
        head = tail = 0;
        Arrays.fill(cp, null);
        for (int w = 0; w < nWin; w++) {
            first[w] = 0;
            n[w][0] = n[w][1] = 0;
            sum[w][0] = sum[w][1] = 0;
            newN[w] = 0;
            cps[w][0].clear();
            cps[w][1].clear();
        }
        seen = false;
        nLife = 0;
        hasLast[0] = hasLast[1] = false;
        recentN = 0;
        recentAdded = 0;
    }

    private int slot(long seq) {
        return (int) (seq & (minute.length - 1));
    }

    private void grow() {
        int cap = minute.length;
        long[] m2 = new long[cap * 2], c2 = new long[cap * 2];
        String[] p2 = new String[cap * 2];
        boolean[] o2 = new boolean[cap * 2], w2 = new boolean[cap * 2];
        for (long s = head; s < tail; s++) {
            int from = slot(s), to = (int) (s & (cap * 2 - 1));
            m2[to] = minute[from];
            c2[to] = cents[from];
            p2[to] = cp[from];
            o2[to] = out[from];
            w2[to] = wasNew[from];
        }
        minute = m2;
        cents = c2;
        cp = p2;
        out = o2;
        wasNew = w2;
    }

    private void drop(int w, int s) {
        int d = out[s] ? OUT : IN;
        n[w][d]--;
        sum[w][d] -= cents[s];
        if (wasNew[s]) newN[w]--;
        HashMap<String, int[]> m = cps[w][d];
        int[] c = m.get(cp[s]);
        if (--c[0] == 0) m.remove(cp[s]);
    }

    /** Expire every window to {@code now}: legs at or before now - length leave it. */
    private void expire(long now) {
        for (int w = 0; w < nWin; w++) {
            long horizon = now - windows[w];
            long f = Math.max(first[w], head);
            while (f < tail && minute[slot(f)] <= horizon) {
                drop(w, slot(f));
                f++;
            }
            first[w] = f;
        }
        long oldest = first[nWin - 1];
        while (head < oldest) {
            cp[slot(head)] = null;
            head++;
        }
    }

    /** The cap: drop the oldest kept leg from every window that still holds it. */
    private void evictOldest() {
        int s = slot(head);
        for (int w = 0; w < nWin; w++) {
            if (first[w] <= head) {
                drop(w, s);
                first[w] = head + 1;
            }
        }
        cp[s] = null;
        head++;
    }

    /** Apply one leg and write the account's features as of it into {@code dst} from {@code off}. */
    public void apply(long now, boolean isOut, String counterparty, long amount, double[] dst, int off) {
        final long longest = windows[nWin - 1];
        if (seen && now - lastMinute >= longest) reset();
        long gap;
        if (!seen) {
            gap = longest;
            seen = true;
            lastMinute = firstMinute = now;
        } else {
            gap = now - lastMinute;
            if (gap < 0) gap = 0;
            else lastMinute = now;
            if (gap > longest) gap = longest;
        }
        nLife++;
        expire(now);

        int d = isOut ? OUT : IN, o = 1 - d;
        boolean isNew = !cps[nWin - 1][OUT].containsKey(counterparty) && !cps[nWin - 1][IN].containsKey(counterparty);

        if (!hasLast[d] || now >= lastLegMinute[d]) {
            hasLast[d] = true;
            lastLegMinute[d] = now;
            lastLegCents[d] = amount;
            lastLegSeq[d] = tail; // the sequence number this leg gets below
        }

        // this amount against the previous RECENT amounts
        double amtVsMed;
        long same = 0;
        if (recentN > 0) {
            long med = recentSorted[(recentN - 1) / 2];
            amtVsMed = med > 0 ? (double) amount / (double) med : (amount > 0 ? 1.0 : 0.0);
            int lo = lowerBound(recentSorted, recentN, amount);
            int hi = lo;
            while (hi < recentN && recentSorted[hi] == amount) hi++;
            same = hi - lo;
        } else {
            amtVsMed = -1.0;
        }
        if (recentN < recentLegs) {
            recent[recentN] = amount;
            insertSorted(amount, recentN);
            recentN++;
        } else {
            int sl = (int) (recentAdded % recentLegs);
            removeSorted(recent[sl]);
            recent[sl] = amount;
            insertSorted(amount, recentN - 1);
        }
        recentAdded++;

        // the leg joins every window
        if (tail - head == minute.length) grow();
        int s = slot(tail);
        minute[s] = now;
        cents[s] = amount;
        cp[s] = counterparty;
        out[s] = isOut;
        wasNew[s] = isNew;
        tail++;
        for (int w = 0; w < nWin; w++) {
            n[w][d]++;
            sum[w][d] += amount;
            if (isNew) newN[w]++;
            int[] c = cps[w][d].get(counterparty);
            if (c == null) cps[w][d].put(counterparty, new int[] {1});
            else c[0]++;
        }
        if (tail - head > maxLegs) evictOldest();

        // the latest previous leg the other way, if still kept after the cap (neither expired nor dropped)
        double sinceOpp, oppRatio;
        if (hasLast[o] && lastLegSeq[o] >= head) {
            sinceOpp = (double) Math.max(0, now - lastLegMinute[o]);
            long oc = lastLegCents[o];
            oppRatio = oc > 0 ? (double) amount / (double) oc : (amount > 0 ? 1.0 : 0.0);
        } else {
            sinceOpp = (double) longest;
            oppRatio = -1.0;
        }

        int i = off;
        for (int w = 0; w < nWin; w++) {
            long oc = sum[w][OUT], ic = sum[w][IN];
            dst[i++] = (double) n[w][OUT];
            dst[i++] = (double) n[w][IN];
            dst[i++] = (double) oc / 100.0;
            dst[i++] = (double) ic / 100.0;
            dst[i++] = (double) cps[w][OUT].size();
            dst[i++] = (double) cps[w][IN].size();
            long mx = Math.max(oc, ic), mn = Math.min(oc, ic);
            dst[i++] = mx > 0 ? (double) mn / (double) mx : 0.0;
            dst[i++] = oc + ic != 0 ? (double) (oc - ic) / (double) (oc + ic) : 0.0;
        }
        long nShort = n[0][OUT] + n[0][IN], nLong = n[nWin - 1][OUT] + n[nWin - 1][IN];
        dst[i++] = (double) (nShort * (longest / windows[0])) / (double) nLong;
        dst[i++] = (double) gap;
        dst[i++] = (double) cps[cpWindow][d].get(counterparty)[0];
        dst[i++] = (double) cps[nWin - 1][d].get(counterparty)[0];
        dst[i++] = isNew ? 1.0 : 0.0;
        dst[i++] = (double) newN[cpWindow] / (double) (n[cpWindow][OUT] + n[cpWindow][IN]);
        dst[i++] = (double) newN[nWin - 1] / (double) nLong;
        dst[i++] = sinceOpp;
        dst[i++] = oppRatio;
        dst[i++] = amtVsMed;
        dst[i++] = (double) same;
        dst[i++] = (double) Math.min(Math.max(0, now - firstMinute), longest);
        dst[i++] = (double) nLife;
    }

    private static int lowerBound(long[] a, int len, long x) {
        int lo = 0, hi = len;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (a[mid] < x) lo = mid + 1;
            else hi = mid;
        }
        return lo;
    }

    private void insertSorted(long x, int len) {
        int at = lowerBound(recentSorted, len, x);
        System.arraycopy(recentSorted, at, recentSorted, at + 1, len - at);
        recentSorted[at] = x;
    }

    private void removeSorted(long x) {
        int at = lowerBound(recentSorted, recentN, x);
        System.arraycopy(recentSorted, at + 1, recentSorted, at, recentN - at - 1);
    }
}
