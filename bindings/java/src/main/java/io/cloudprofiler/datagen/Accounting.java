package io.cloudprofiler.datagen;

import java.util.Arrays;

/**
 * One stream's bookkeeping, exactly as datagen/FRAMING.md's "Accounting"
 * says (and as the Go receiver's datagen/accounting.go does). Ids are
 * unsigned 64-bit numbers held in longs: every comparison is unsigned.
 *
 * <ul>
 * <li>The range is {@code [first, first + tuples)} from HELLO (the caller
 * refuses a HELLO whose sum overflows 64 bits: {@link #rangeOverflows}).
 * <li>An id outside it counts in {@code outOfRange} and nothing else.
 * <li>{@code id == next}: received, next moves on; {@code id > next}:
 * received, {@code next .. id-1} becomes a gap; {@code id < next} in a
 * recorded gap: received late (the gap shrinks or splits, lost shrinks by
 * one, outOfOrder grows); {@code id < next} in no recorded gap: a duplicate.
 * <li>{@link #finish(long)}: {@code next .. first + sent - 1} is a gap.
 * <li>At most {@link #MAX_RECORDED_GAPS} gaps are recorded; past that a gap
 * still counts in lost, but a late id in it counts as a duplicate ({@code
 * overflow}: lost is then an upper bound).
 * </ul>
 *
 * <p>{@link #mark()} and {@link #rollback()} undo what was added since the
 * mark: the factory adds a bucket's ids, and takes them back if the bucket
 * never reached the consumer's queue (the factory closed while it waited),
 * so that {@code received} counts only what was handed over. Cheap: the
 * gaps are copied only if a late id changes one of them after the mark.
 *
 * <p>One thread only.
 */
final class Accounting {
    /** Gaps kept for late ids to repay and for the report (FRAMING.md). */
    static final int MAX_RECORDED_GAPS = 4096;

    final long first, tuples;
    long next;
    long received, lost, outOfOrder, duplicates, outOfRange;
    /** A gap could not be recorded (past MAX_RECORDED_GAPS). */
    boolean overflow;
    // recorded gaps, inclusive, in id order, disjoint, all below next
    private long[] from = new long[8], to = new long[8];
    private int n;

    // the mark
    private boolean marked, savedGaps;
    private long mNext, mReceived, mLost, mOutOfOrder, mDuplicates, mOutOfRange;
    private boolean mOverflow;
    private int mN;
    private long[] mFrom, mTo;

    Accounting(long first, long tuples) {
        this.first = first;
        this.tuples = tuples;
        this.next = first;
    }

    /** True if first + tuples does not fit in 64 unsigned bits (such a HELLO is refused). */
    static boolean rangeOverflows(long first, long tuples) {
        return Long.compareUnsigned(first + tuples, first) < 0;
    }

    private boolean inRange(long id) {
        return Long.compareUnsigned(id - first, tuples) < 0; // first <= id < first + tuples, without overflow
    }

    /** Whether {@link #add}(id) would count id as received (the factory deserializes only those). */
    boolean wouldReceive(long id) {
        if (!inRange(id)) return false;
        if (Long.compareUnsigned(id, next) >= 0) return true;
        return findGap(id) >= 0;
    }

    /** Accounts for one id that arrived (and was handed over). */
    void add(long id) {
        if (!inRange(id)) {
            outOfRange++;
        } else if (id == next) {
            received++;
            next++;
        } else if (Long.compareUnsigned(id, next) > 0) {
            gap(next, id - 1);
            received++;
            next = id + 1;
        } else {
            late(id);
        }
    }

    /** The stream ended having sent {@code sent} tuples: the tail never received is a gap. */
    void finish(long sent) {
        long end = first + sent;
        if (Long.compareUnsigned(next, end) < 0) {
            gap(next, end - 1);
            next = end;
        }
    }

    private void gap(long lo, long hi) {
        lost += hi - lo + 1;
        if (n == MAX_RECORDED_GAPS) {
            overflow = true;
            return;
        }
        if (n == from.length) { // an append only: the mark's n restores it without a copy
            from = Arrays.copyOf(from, Math.min(MAX_RECORDED_GAPS, n * 2));
            to = Arrays.copyOf(to, from.length);
        }
        from[n] = lo;
        to[n++] = hi;
    }

    /** The index of the recorded gap holding id, or -1. */
    private int findGap(long id) {
        int lo = 0, hi = n - 1;
        while (lo <= hi) { // the first gap whose end is >= id
            int mid = (lo + hi) >>> 1;
            if (Long.compareUnsigned(to[mid], id) < 0) lo = mid + 1;
            else hi = mid - 1;
        }
        return lo < n && Long.compareUnsigned(from[lo], id) <= 0 ? lo : -1;
    }

    /** An id below next: it repays the recorded gap it lies in, or it was seen already. */
    private void late(long id) {
        int i = findGap(id);
        if (i < 0) {
            duplicates++;
            return;
        }
        saveGaps();
        long lo = from[i], hi = to[i];
        if (lo == hi) {
            System.arraycopy(from, i + 1, from, i, n - i - 1);
            System.arraycopy(to, i + 1, to, i, n - i - 1);
            n--;
        } else if (id == lo) {
            from[i]++;
        } else if (id == hi) {
            to[i]--;
        } else if (n < MAX_RECORDED_GAPS) { // split: the upper half is a new recorded gap
            if (n == from.length) {
                from = Arrays.copyOf(from, Math.min(MAX_RECORDED_GAPS, n * 2));
                to = Arrays.copyOf(to, from.length);
            }
            System.arraycopy(from, i + 1, from, i + 2, n - i - 1);
            System.arraycopy(to, i + 1, to, i + 2, n - i - 1);
            to[i] = id - 1;
            from[i + 1] = id + 1;
            to[i + 1] = hi;
            n++;
        } else { // no room: the lower half stays recorded, the upper half's ids are lost but no longer matched
            to[i] = id - 1;
            overflow = true;
        }
        lost--;
        received++;
        outOfOrder++;
    }

    /** Remembers the state: {@link #rollback()} returns to it. */
    void mark() {
        marked = true;
        savedGaps = false;
        mNext = next;
        mReceived = received;
        mLost = lost;
        mOutOfOrder = outOfOrder;
        mDuplicates = duplicates;
        mOutOfRange = outOfRange;
        mOverflow = overflow;
        mN = n;
    }

    /** Before a recorded gap changes in place: keep the marked gaps (appends need no copy). */
    private void saveGaps() {
        if (!marked || savedGaps) return;
        savedGaps = true;
        if (mFrom == null || mFrom.length < mN) {
            mFrom = new long[Math.max(mN, 8)];
            mTo = new long[mFrom.length];
        }
        System.arraycopy(from, 0, mFrom, 0, mN);
        System.arraycopy(to, 0, mTo, 0, mN);
    }

    /** Undoes everything added since {@link #mark()}. */
    void rollback() {
        if (!marked) throw new IllegalStateException("rollback without a mark");
        next = mNext;
        received = mReceived;
        lost = mLost;
        outOfOrder = mOutOfOrder;
        duplicates = mDuplicates;
        outOfRange = mOutOfRange;
        overflow = mOverflow;
        if (savedGaps) {
            if (from.length < mN) {
                from = new long[mN];
                to = new long[mN];
            }
            System.arraycopy(mFrom, 0, from, 0, mN);
            System.arraycopy(mTo, 0, to, 0, mN);
        }
        n = mN;
        marked = false;
        savedGaps = false;
    }

    /** Recorded gaps now. */
    int recordedGaps() {
        return n;
    }

    /** The first {@code max} recorded gaps, in id order: {@code {from, to}}, inclusive. */
    long[][] gaps(int max) {
        long[][] g = new long[Math.min(n, max)][];
        for (int i = 0; i < g.length; i++) g[i] = new long[] {from[i], to[i]};
        return g;
    }

    /** The report's gaps_truncated: more gaps than the report lists, or some never recorded. */
    boolean truncated(int max) {
        return overflow || n > max;
    }
}
