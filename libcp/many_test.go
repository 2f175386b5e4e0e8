package main

import (
	"sync"
	"testing"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"

	"github.com/stretchr/testify/require"
)

func seqIDs(from, n int) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(from + i*3 - 7000)
	}
	return v
}

// LogTSMany logs every id once, in order, on every path: the owned
// BUFFER_IDENTITY _TSC run (many blocks and laps of the ring: 1024-record
// blocks, 4 of them), the shared path, records with CLOCK_MONOTONIC_RAW,
// every format, and batches of every size around the block's end.
func TestLogTSManyEveryIDOnceInOrder(t *testing.T) {
	type tc struct {
		name string
		f    logfile.Format
		h    handlers.Type
	}
	cases := []tc{}
	for _, f := range allFormats {
		cases = append(cases, tc{"buffer " + f.String(), f, handlers.BufferIdentity})
	}
	cases = append(cases, tc{"comp", logfile.ZstdTSC, handlers.BufferIdentityComp},
		tc{"identity", logfile.BinaryTSC, handlers.Identity}, tc{"identity ascii", logfile.ASCII, handlers.Identity})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, chn := open(t, "many "+c.name, c.f, c.h)
			var want []int64
			next := 0
			// sizes that start and end everywhere in a block: 1, 2, 1023, 1024, 1025, 5000, ...
			for _, n := range []int{1, 2, 1023, 1024, 1025, 5000, 7, 4096, 4097, 10_000, 3} {
				ids := seqIDs(next, n)
				next += n
				got, rc := logTSMany(ch, ids, int64(n))
				require.Equal(t, int64(n), got)
				require.Zero(t, rc)
				want = append(want, ids...)
				require.Zero(t, logTS(ch, int64(next)), "single calls interleave with batches")
				want = append(want, int64(next))
				next++
			}
			require.NoError(t, closeChannel(ch, "close"))
			recs, lf := readRecords(t, chn.path)
			require.Equal(t, want, ids(recs))
			prev := uint64(0)
			for _, r := range recs {
				require.GreaterOrEqual(t, r.TSC, prev, "one thread: TSC never goes back")
				prev = r.TSC
				require.Equal(t, c.f.HasMono(), r.MonoNs != 0)
			}
			require.Zero(t, lf.Summary.Holes)
			require.Equal(t, uint64(len(want)), lf.Summary.Trailer.Positions)
		})
	}
}

// Several threads batching on one channel (the owner is revoked, the rest
// goes through the shared path): every id once, each thread's in order.
func TestLogTSManyThreads(t *testing.T) {
	for _, noBias := range []bool{false, true} {
		if noBias {
			t.Setenv("CP_NO_OWNER_BIAS", "1")
		}
		ch, c := open(t, "many threads", logfile.ZstdTSC, handlers.BufferIdentity)
		const threads, batches, per = 4, 50, 997
		var wg sync.WaitGroup
		for g := 0; g < threads; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for b := 0; b < batches; b++ {
					ids := make([]int64, per)
					for i := range ids {
						ids[i] = int64((g*batches+b)*per + i)
					}
					if got, rc := logTSMany(ch, ids, per); got != per || rc != 0 {
						t.Errorf("LogTSMany: %d, %d", got, rc)
						return
					}
				}
			}(g)
		}
		wg.Wait()
		require.NoError(t, closeChannel(ch, "close"))
		got := requireIDsUpTo(t, c.path, threads*batches*per)
		last := map[int64]int64{}
		for _, id := range got {
			g := id / (batches * per)
			if p, ok := last[g]; ok {
				require.Greater(t, id, p, "a thread's ids stay in order")
			}
			last[g] = id
		}
	}
}

// Every handler: sampling per id, counters add n, NULLH returns n.
func TestLogTSManyHandlers(t *testing.T) {
	ids := seqIDs(0, 10_000)
	t.Run("xoy", func(t *testing.T) {
		ch, c := open(t, "many xoy", logfile.BinaryTSC, handlers.XoY)
		require.NoError(t, parameterize(ch, 1, 10))
		require.NoError(t, parameterize(ch, 0, 3))
		got, rc := logTSMany(ch, ids, int64(len(ids)))
		require.Equal(t, int64(len(ids)), got)
		require.Zero(t, rc)
		require.NoError(t, closeChannel(ch, "close"))
		recs, _ := readRecords(t, c.path)
		var want []int64
		for _, id := range ids {
			if ((id%10)+10)%10 < 3 {
				want = append(want, id)
			}
		}
		require.Equal(t, want, ids2(recs))
	})
	t.Run("downsample", func(t *testing.T) {
		ch, c := open(t, "many ds", logfile.ZstdTSC, handlers.Downsample)
		require.NoError(t, parameterize(ch, 0, 7))
		got, rc := logTSMany(ch, ids, int64(len(ids)))
		require.Equal(t, int64(len(ids)), got)
		require.Zero(t, rc)
		require.NoError(t, closeChannel(ch, "close"))
		recs, _ := readRecords(t, c.path)
		var want []int64
		for i := 0; i < len(ids); i += 7 {
			want = append(want, ids[i])
		}
		require.Equal(t, want, ids2(recs))
	})
	t.Run("median", func(t *testing.T) {
		ch, c := open(t, "many median", logfile.BinaryTSC, handlers.Median)
		require.NoError(t, parameterize(ch, 0, 100))
		got, rc := logTSMany(ch, ids, int64(len(ids)))
		require.Equal(t, int64(len(ids)), got)
		require.Zero(t, rc)
		require.NoError(t, closeChannel(ch, "close"))
		recs, _ := readRecords(t, c.path)
		require.Len(t, recs, 100)
	})
	t.Run("firstlast", func(t *testing.T) {
		ch, c := open(t, "many fl", logfile.BinaryTSC, handlers.FirstLast)
		got, rc := logTSMany(ch, ids, int64(len(ids)))
		require.Equal(t, int64(len(ids)), got)
		require.Zero(t, rc)
		require.NoError(t, closeChannel(ch, "close"))
		recs, _ := readRecords(t, c.path)
		require.Equal(t, []int64{ids[0], ids[len(ids)-1]}, ids2(recs))
	})
	for _, h := range []handlers.Type{handlers.PeriodicCounter, handlers.FastPeriodicCounter} {
		t.Run(h.String(), func(t *testing.T) {
			ch, c := open(t, "many "+h.String(), logfile.BinaryTSC, h)
			for k := 0; k < 3; k++ {
				got, rc := logTSMany(ch, ids, int64(len(ids)))
				require.Equal(t, int64(len(ids)), got)
				require.Zero(t, rc)
			}
			require.Zero(t, logTS(ch, 1))
			require.NoError(t, closeChannel(ch, "close"))
			recs, lf := readCounters(t, c.path)
			sum := uint64(0)
			for _, r := range recs {
				sum += r.Count
			}
			require.Equal(t, uint64(3*len(ids)+1), sum)
			require.Equal(t, uint64(3*len(ids)+1), lf.Summary.Trailer.Total)
			got, rc := logTSMany(ch, ids, int64(len(ids)))
			require.Zero(t, got)
			require.Equal(t, int32(-2), rc)
		})
	}
	t.Run("null", func(t *testing.T) {
		ch, _ := open(t, "many null", logfile.BinaryTSC, handlers.Null)
		got, rc := logTSMany(ch, ids, int64(len(ids)))
		require.Equal(t, int64(len(ids)), got)
		require.Zero(t, rc)
		require.NoError(t, closeChannel(ch, "close"))
		got, rc = logTSMany(ch, ids, int64(len(ids)))
		require.Zero(t, got)
		require.Equal(t, int32(-2), rc)
	})
}

func ids2(recs []logfile.Record) []int64 { return ids(recs) }

// Codes: bad handle, closed, n <= 0, NULL ids, drop mode.
func TestLogTSManyErrors(t *testing.T) {
	ids := seqIDs(0, 100)
	got, rc := logTSMany(12345, ids, 100)
	require.Zero(t, got)
	require.Equal(t, int32(-1), rc)
	got, rc = logTSMany(-1, ids, 100)
	require.Zero(t, got)
	require.Equal(t, int32(-1), rc)

	ch, c := open(t, "many errors", logfile.BinaryTSC, handlers.BufferIdentity)
	got, rc = logTSMany(ch, ids, 0)
	require.Zero(t, got)
	require.Zero(t, rc)
	got, rc = logTSMany(ch, ids, -5)
	require.Zero(t, got)
	require.Zero(t, rc)
	got, rc = logTSMany(ch, nil, 5)
	require.Zero(t, got)
	require.Equal(t, int32(-10), rc)
	require.NoError(t, closeChannel(ch, "close"))
	got, rc = logTSMany(ch, ids, 100)
	require.Zero(t, got)
	require.Equal(t, int32(-2), rc)
	recs, _ := readRecords(t, c.path)
	require.Empty(t, recs)

	// Drop mode: a ring of 4 blocks of 1024 cannot take a batch of 100k
	// records unless the drain keeps up with it: some are dropped and
	// counted, the batch goes on, what was accepted is in the file. With
	// the other vCPU busy the batch's thread is preempted while the drain
	// runs (1 batch in 4 dropped nothing), so batches are logged until one
	// drops (at most 50); every accepted record must be in the file.
	ch, c = open(t, "many drop", logfile.BinaryTSC, handlers.BufferIdentity)
	require.NoError(t, parameterize(ch, handlers.ArgDropWhenFull, 1))
	var big []int64 // every id offered, in order
	accepted, batches := int64(0), 0
	for rc = 0; rc == 0 && batches < 50; batches++ {
		batch := seqIDs(batches*300_000, 100_000)
		big = append(big, batch...)
		got, rc = logTSMany(ch, batch, int64(len(batch)))
		accepted += got
		if rc != 0 {
			require.Equal(t, int32(-13), rc)
			require.Less(t, got, int64(len(batch)))
			require.Greater(t, got, int64(0))
		} else {
			require.Equal(t, int64(len(batch)), got)
		}
	}
	require.Equal(t, int32(-13), rc, "%d batches of 100k into a ring of 4 x 1024 and none dropped", batches)
	require.NoError(t, closeChannel(ch, "close"))
	recs, lf := readRecords(t, c.path)
	require.Len(t, recs, int(accepted))
	require.Equal(t, uint64(len(big))-uint64(accepted), lf.Summary.Trailer.Dropped)
	// accepted ids are a subsequence of the batch, in order
	k := 0
	for _, r := range recs {
		for k < len(big) && big[k] != r.TupleID {
			k++
		}
		require.Less(t, k, len(big), "id %d out of order or unknown", r.TupleID)
	}
}
