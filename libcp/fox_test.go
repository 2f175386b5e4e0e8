package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"

	"github.com/stretchr/testify/require"
)

func byID(t *testing.T, recs []logfile.Record) map[int64]uint64 {
	t.Helper()
	m := map[int64]uint64{}
	for _, r := range recs {
		_, dup := m[r.TupleID]
		require.False(t, dup, "tuple %d twice", r.TupleID)
		m[r.TupleID] = r.TSC
	}
	return m
}

// A FOX_START and a FOX_END channel in one process: every tuple logged on
// END after START has a start record, an end record and a return record,
// in that order of TSC; malformed datagrams are dropped and counted.
func TestFoxReturnTrip(t *testing.T) {
	for _, f := range []logfile.Format{logfile.ZstdTSC, logfile.Binary, logfile.ASCIITSC} {
		t.Run(f.String(), func(t *testing.T) {
			os.Setenv("CP_RET_LISTEN", "127.0.0.1:0")
			defer os.Setenv("CP_RET_LISTEN", "")
			start, sc := open(t, "fox start", f, handlers.FoxStart)
			require.NotNil(t, sc.retLog)
			addr := sc.fox.listen
			require.True(t, strings.HasPrefix(addr, "127.0.0.1:") && !strings.HasSuffix(addr, ":0"), addr)
			os.Setenv("CP_RET_START", addr)
			defer os.Setenv("CP_RET_START", "")
			end, ec := open(t, "fox end", f, handlers.FoxEnd)

			// Datagrams that are not ReTACK v1.
			u, err := net.Dial("udp", addr)
			require.NoError(t, err)
			good := []byte{'C', 'P', 'R', 'A', 1, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}
			bad := [][]byte{{1, 2, 3}, append([]byte{'X'}, good[1:]...), append(append([]byte{}, good[:4]...), append([]byte{2}, good[5:]...)...),
				append(append([]byte{}, good[:7]...), append([]byte{25}, good[8:]...)...), append(append([]byte{}, good...), 0)}
			for _, b := range bad {
				_, err := u.Write(b)
				require.NoError(t, err)
			}
			u.Close()

			const n = 3000
			for i := 0; i < n; i++ {
				require.Zero(t, logTS(start, int64(i)))
				require.Zero(t, logTS(end, int64(i)))
				if i%50 == 49 {
					time.Sleep(200 * time.Microsecond) // the receiver's socket buffer may be small (rmem_max)
				}
			}
			rv := sc.retLog.recv
			deadline := time.Now().Add(10 * time.Second)
			for rv.received.Load() < n && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			require.NoError(t, closeChannel(end, "close"))
			require.NoError(t, closeChannel(start, "close"))
			_, err = lookup(sc.retLog.handle)
			require.Error(t, err, "the return log closes with its START channel")

			srecs, slf := readRecords(t, sc.path)
			erecs, elf := readRecords(t, ec.path)
			rrecs, rlf := readRecords(t, sc.retLog.path)
			require.Len(t, srecs, n)
			require.Len(t, erecs, n)
			require.Len(t, rrecs, n, "kernel drops %d", rv.ovfl.Load())
			s, e, r := byID(t, srecs), byID(t, erecs), byID(t, rrecs)
			var worst uint64
			best := ^uint64(0)
			for i := int64(0); i < n; i++ {
				require.Contains(t, r, i)
				require.GreaterOrEqual(t, e[i], s[i], "tuple %d: end before start", i)
				require.GreaterOrEqual(t, r[i], e[i], "tuple %d: returned before it ended", i)
				worst = max(worst, r[i]-e[i])
				best = min(best, r[i]-e[i])
			}
			t.Logf("%s: %d round trips; return (ReTACK sent to arrival) %.1f..%.1f us", f, n, float64(best)/(freq.Hz/1e6), float64(worst)/(freq.Hz/1e6))

			require.Equal(t, "start", slf.Header.Fox.Role)
			require.Equal(t, addr, slf.Header.Fox.Listen)
			require.Equal(t, filepath.Base(sc.retLog.path), slf.Header.Fox.ReturnFile)
			require.True(t, strings.HasSuffix(sc.retLog.path, ".ret"+filepath.Ext(sc.path)) || strings.HasSuffix(sc.retLog.path, ".ret.cplog.txt"), sc.retLog.path)
			require.Equal(t, "FOX_START", rlf.Header.Handler)
			require.Equal(t, "return", rlf.Header.Fox.Role)
			require.Equal(t, filepath.Base(sc.path), rlf.Header.Fox.StartFile)
			require.Equal(t, slf.Header.Channel, rlf.Header.Channel)
			require.Equal(t, "end", elf.Header.Fox.Role)
			require.Equal(t, addr, elf.Header.Fox.Start)
			require.Equal(t, addr, elf.Header.Fox.StartAddr)
			require.Equal(t, "CP_RET_START", elf.Header.Fox.StartFoundVia)

			for _, lf := range []*logfile.File{slf, rlf} {
				st := lf.Summary.Trailer.Fox
				require.NotNil(t, st)
				require.Equal(t, uint64(n), st.Received)
				require.Equal(t, uint64(len(bad)), st.Malformed)
			}
			require.Equal(t, uint64(n), elf.Summary.Trailer.Fox.Sent)
			require.Zero(t, elf.Summary.Trailer.Fox.SendFailed)
		})
	}
}

// A missing or bad peer is CP_ERR_CONFIG at open, with a message naming the
// variable; nothing is left in the log directory.
func TestFoxOpenErrors(t *testing.T) {
	before, _ := filepath.Glob(filepath.Join(logDir, "*fox_bad*"))
	busy, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer busy.Close()
	for _, k := range []struct {
		h        handlers.Type
		env, val string
	}{
		{handlers.FoxEnd, "CP_RET_START", ""},
		{handlers.FoxEnd, "CP_RET_START", "127.0.0.1"},
		{handlers.FoxEnd, "CP_RET_START", "127.0.0.1:0"},
		{handlers.FoxEnd, "CP_RET_START", "127.0.0.1:70000"},
		{handlers.FoxEnd, "CP_RET_START", "no-such-host.invalid:7000"},
		{handlers.FoxStart, "CP_RET_LISTEN", "garbage"},
		{handlers.FoxStart, "CP_RET_LISTEN", "192.0.2.1:7000"}, // not an address of this host
		{handlers.FoxStart, "CP_RET_LISTEN", busy.LocalAddr().String()},
	} {
		os.Setenv(k.env, k.val)
		_, err := openChannel("fox bad", logfile.BinaryTSC, k.h)
		os.Setenv(k.env, "")
		require.Error(t, err, "%s=%q", k.env, k.val)
		require.Equal(t, int32(-16), codeOf(err), "%s=%q: %v", k.env, k.val, err)
		require.Contains(t, err.Error(), k.env)
	}
	after, _ := filepath.Glob(filepath.Join(logDir, "*fox_bad*"))
	require.Equal(t, before, after)
}

// Closing everything at once (atexit) closes a return log before or after
// its START channel without trouble.
func TestFoxCloseAll(t *testing.T) {
	os.Setenv("CP_RET_LISTEN", "127.0.0.1:0")
	defer os.Setenv("CP_RET_LISTEN", "")
	start, sc := open(t, "fox all", logfile.BinaryTSC, handlers.FoxStart)
	os.Setenv("CP_RET_START", sc.fox.listen)
	defer os.Setenv("CP_RET_START", "")
	end, _ := open(t, "fox all end", logfile.BinaryTSC, handlers.FoxEnd)
	for i := 0; i < 100; i++ {
		require.Zero(t, logTS(start, int64(i)))
		require.Zero(t, logTS(end, int64(i)))
	}
	require.NoError(t, closeAll("close_all"))
	require.Equal(t, int32(-2), logTS(end, 1))
	_, rlf := readRecords(t, sc.retLog.path)
	require.NotNil(t, rlf.Summary.Trailer)
}
