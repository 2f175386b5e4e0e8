package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The C CRC-32C (both its paths) and frame sealing agree with the Go
// format's on random bytes of many lengths and alignments.
func TestCRC32CMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 2))
	buf := make([]byte, 1<<16+64)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	modes := []int{0, 1}
	if crcHWC() {
		modes = append(modes, 2)
	}
	t.Logf("SSE4.2 crc32: %v", crcHWC())
	lengths := []int{1000, 1023, 1024, 4093, 4096, 65535, 1 << 16}
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for off := 0; off < 8; off++ {
			b := buf[off : off+n]
			want := logfile.CRC(b)
			head, payload := buf[off+n%29:][:28], b
			wantFrame := logfile.FrameCRC(head, payload)
			for _, m := range modes {
				require.Equal(t, want, crc32cC(0, b, m), "len %d offset %d mode %d", n, off, m)
				require.Equal(t, wantFrame, crc32cC(crc32cC(0, head, m), payload, m), "frame: len %d offset %d mode %d", n, off, m)
			}
		}
		if n > 4096 {
			continue
		}
		frame := make([]byte, logfile.FrameHeaderSize+n)
		for i := range frame {
			frame[i] = byte(rng.Uint32())
		}
		binary.LittleEndian.PutUint32(frame[12:], uint32(n))
		goSealed := append([]byte(nil), frame...)
		logfile.Seal(goSealed)
		sealC(frame)
		require.Equal(t, goSealed, frame, "sealed frame of %d payload bytes", n)
	}
}

func randStatus(rng *rand.Rand) logfile.Status {
	u := func() uint64 { return rng.Uint64() >> rng.UintN(64) }
	return logfile.Status{Seq: u(), Accepted: u(), Written: u(), Unwritten: u(), Refused: u(), Dropped: u(),
		Errno: uint32(u()), State: uint32(rng.UintN(4))}
}

// The C status encoder is byte for byte logfile.AppendStatusFrame and
// AppendStatusLine, and cp_status_write puts exactly that, in place, into
// slot seq % 2 of a real file (which does not grow).
func TestStatusEncodingMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	top := logfile.Status{Seq: math.MaxUint64, Accepted: math.MaxUint64, Written: math.MaxUint64, Unwritten: math.MaxUint64,
		Refused: math.MaxUint64, Dropped: math.MaxUint64, Errno: math.MaxUint32, State: math.MaxUint32}
	for i := 0; i < 2000; i++ {
		s := randStatus(rng)
		switch i {
		case 0:
			s = logfile.Status{}
		case 1:
			s = top
		}
		require.Equal(t, logfile.AppendStatusFrame(nil, s), appendStatus(nil, false, s), "%+v", s)
		line := appendStatus(nil, true, s)
		require.Equal(t, string(logfile.AppendStatusLine(nil, s)), string(line), "%+v", s)
		require.Len(t, line, logfile.StatusLineSize)
	}

	for _, f := range []logfile.Format{logfile.ASCIITSC, logfile.BinaryTSC} {
		ch, c := open(t, "status write", f, handlers.Identity)
		size := int64(logfile.StatusFrameSize)
		if f.IsASCII() {
			size = logfile.StatusLineSize
		}
		st0, err := os.Stat(c.path)
		require.NoError(t, err)
		for seq := uint64(2); seq < 14; seq++ {
			want := randStatus(rng)
			want.Seq = seq
			want.State = uint32(seq % 3) // open, closed, closed with loss
			state := want.State
			if seq >= 12 { // flushed on SIGTERM: an update that says open then says so too
				want.State, state = logfile.StateSignal, uint32(13-seq)*logfile.StateSignal
			}
			setSlotCounts(c, want.Unwritten, want.Refused, want.Dropped, want.Errno)
			c.writeStatus(state, want.Accepted, want.Written)
			got := make([]byte, size)
			_, err := readAt(c.path, got, statusOffset(c)+int64(seq%2)*size)
			require.NoError(t, err)
			if f.IsASCII() {
				require.Equal(t, string(logfile.AppendStatusLine(nil, want)), string(got), "%s seq %d", f, seq)
			} else {
				require.Equal(t, logfile.AppendStatusFrame(nil, want), got, "%s seq %d", f, seq)
			}
		}
		st1, err := os.Stat(c.path)
		require.NoError(t, err)
		require.Equal(t, st0.Size(), st1.Size(), "%s: status updates are written in place", f)
		setSlotCounts(c, 0, 0, 0, 0)
		require.NoError(t, closeChannel(ch, "close"))
	}
}

func readAt(path string, b []byte, off int64) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.ReadAt(b, off)
}

// readSlots decodes the two status slots where the format puts them: right
// after the header (binary: after the header JSON; ASCII: after the
// #header and #columns lines). A slot that does not verify is nil.
func readSlots(t *testing.T, path string) [2]*logfile.Status {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out [2]*logfile.Status
	if bytes.HasPrefix(data, []byte(logfile.ASCIIMagic+"\n")) {
		r := bufio.NewReader(bytes.NewReader(data))
		for i := 0; i < 3; i++ { // magic, #header, #columns
			_, err := r.ReadString('\n')
			require.NoError(t, err)
		}
		for i := range out {
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			if s, err := logfile.ParseStatusLine(line); err == nil {
				out[i] = &s
			}
		}
		return out
	}
	require.True(t, bytes.HasPrefix(data, []byte(logfile.Magic)))
	require.Equal(t, uint16(logfile.Version), binary.LittleEndian.Uint16(data[8:]))
	off := 16 + int(binary.LittleEndian.Uint32(data[12:]))
	for i := range out {
		b := data[off+i*logfile.StatusFrameSize:][:logfile.StatusFrameSize]
		le := binary.LittleEndian
		p := b[logfile.FrameHeaderSize:]
		if le.Uint32(b) != logfile.FrameMagic || b[4] != logfile.KindStatus || b[5] != logfile.CodecRaw ||
			le.Uint16(b[6:])&logfile.FlagCRC == 0 || le.Uint32(b[12:]) != logfile.StatusSize ||
			le.Uint32(b[28:]) != logfile.FrameCRC(b[:28], p) {
			continue
		}
		out[i] = &logfile.Status{Seq: le.Uint64(p), Accepted: le.Uint64(p[8:]), Written: le.Uint64(p[16:]),
			Unwritten: le.Uint64(p[24:]), Refused: le.Uint64(p[32:]), Dropped: le.Uint64(p[40:]),
			Errno: le.Uint32(p[48:]), State: le.Uint32(p[52:])}
	}
	return out
}

// newestStatus is the valid slot with the higher seq (both must verify:
// nothing tears them in these tests). Slot i holds a seq with seq % 2 == i,
// or what the open wrote: seq 1 in slot 0, seq 0 in slot 1.
func newestStatus(t *testing.T, path string) logfile.Status {
	t.Helper()
	s := readSlots(t, path)
	for i, sl := range s {
		require.NotNil(t, sl, "%s: slot %d", path, i)
		require.True(t, sl.Seq%2 == uint64(i) || sl.Seq == uint64(1-i), "%s: slot %d holds seq %d", path, i, sl.Seq)
	}
	if s[0].Seq > s[1].Seq {
		return *s[0]
	}
	return *s[1]
}

// waitStatus polls the newest status until cond holds (10 s at most).
func waitStatus(t *testing.T, path string, cond func(logfile.Status) bool, what string) logfile.Status {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := newestStatus(t, path)
		if cond(st) {
			return st
		}
		require.True(t, time.Now().Before(deadline), "%s: status %+v", what, st)
	}
}

// readAll decodes a file with the library's reader; err is what Records
// said (ErrDamaged when something is known lost).
func readAll(t *testing.T, path string) ([]int64, *logfile.File, error) {
	t.Helper()
	lf, err := logfile.Open(path)
	require.NoError(t, err)
	defer lf.Close()
	var ids []int64
	err = lf.Records(func(r logfile.Record) error { ids = append(ids, r.TupleID); return nil })
	return ids, lf, err
}

// Both slots are there from the open on, and every kind of channel ends
// with a status that says closed and how many it accepted; the reader sees
// the same slot.
func TestStatusSlotsOpenToClose(t *testing.T) {
	cases := []struct {
		f logfile.Format
		h handlers.Type
	}{
		{logfile.ASCIITSC, handlers.BufferIdentity}, {logfile.BinaryTSC, handlers.BufferIdentity},
		{logfile.ZstdTSC, handlers.BufferIdentity}, {logfile.ASCII, handlers.Identity},
		{logfile.BinaryTSC, handlers.Identity}, {logfile.BinaryTSC, handlers.PeriodicCounter},
		{logfile.ASCIITSC, handlers.FastPeriodicCounter}, {logfile.Binary, handlers.FirstLast},
	}
	for _, tc := range cases {
		name := tc.h.String() + " " + tc.f.String()
		ch, c := open(t, "status "+name, tc.f, tc.h)
		s := readSlots(t, c.path)
		require.Equal(t, &logfile.Status{Seq: 1}, s[0], name)
		require.Equal(t, &logfile.Status{Seq: 0}, s[1], name)
		const n = 1500 // one block of 1024 and part of the next
		for i := 0; i < n; i++ {
			require.Zero(t, logTS(ch, int64(i)*3))
		}
		if c.ring != nil { // the drainer's updates: everything is written, the channel still open
			st := waitStatus(t, c.path, func(st logfile.Status) bool { return st.Written == n }, name)
			require.Equal(t, logfile.Status{Seq: st.Seq, Accepted: n, Written: n, State: logfile.StateOpen}, st, name)
		}
		require.NoError(t, closeChannel(ch, "close"))
		st := newestStatus(t, c.path)
		want := logfile.Status{Seq: st.Seq, Accepted: n, State: logfile.StateClosed}
		if c.ring != nil {
			want.Written = n
		}
		require.Equal(t, want, st, name)
		lf, err := logfile.Open(c.path)
		require.NoError(t, err)
		require.Equal(t, &st, lf.Summary.Status, name)
		lf.Close()
	}
}

// smallDisk mounts a tmpfs of the given size (root) as the log directory
// for the rest of the test, or skips the test saying why.
func smallDisk(t *testing.T, size string) string {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v)", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	require.NoError(t, initLibrary())
	old := cfg.logDir
	cfg.logDir = dir
	t.Cleanup(func() { cfg.logDir = old })
	return dir
}

// fillDisk writes a file until the disk is full and returns its path.
func fillDisk(t *testing.T, dir string) string {
	filler := filepath.Join(dir, "filler")
	err := os.WriteFile(filler, make([]byte, 64<<20), 0o644)
	require.ErrorIs(t, err, syscall.ENOSPC, "the filler fills the disk")
	return filler
}

// idLog logs on a channel and keeps the ids by what LogTS said: accepted,
// or refused with CP_ERR_IO (anything else fails the test).
type idLog struct {
	t                 *testing.T
	ch                int64
	accepted, refused []int64
}

func (l *idLog) log(id int64) int32 {
	rc := logTS(l.ch, id)
	switch rc {
	case 0:
		l.accepted = append(l.accepted, id)
	case -12:
		l.refused = append(l.refused, id)
	default:
		l.t.Fatalf("LogTS: %d", rc)
	}
	return rc
}

// IDENTITY on a full disk: a write that does not go in whole is cut back,
// LogTS says CP_ERR_IO and the position counts as refused; once there is
// room again every record goes in. The file then holds every accepted
// record once, none of the refused, nothing damaged, and its status says
// how many were refused.
func TestIdentityFullDiskRollsBack(t *testing.T) {
	for _, f := range []logfile.Format{logfile.ASCIITSC, logfile.BinaryTSC} {
		t.Run(f.String(), func(t *testing.T) {
			dir := smallDisk(t, "64k")
			ch, c := open(t, "identity full", f, handlers.Identity)
			l := &idLog{t: t, ch: ch}
			id := int64(1_000_000)
			logOne := func() int32 { id++; return l.log(id) }
			for i := 0; i < 100; i++ {
				require.Zero(t, logOne())
			}
			filler := fillDisk(t, dir)
			// What still fits the file's last page goes in; the record that
			// crosses its end is written in part, and cut back.
			for len(l.refused) < 300 {
				if logOne() != 0 && len(l.refused) == 1 {
					st, err := os.Stat(c.path)
					require.NoError(t, err)
					t.Logf("first refusal at file size %d (%d bytes into its last page)", st.Size(), st.Size()%4096)
				}
				require.Less(t, id, int64(2_000_000), "a full disk makes IDENTITY refuse")
			}
			full := newestStatus(t, c.path)
			require.Equal(t, uint64(len(l.refused)), full.Refused, "the status follows the refusals")
			require.Equal(t, uint32(syscall.ENOSPC), full.Errno)
			require.NoError(t, os.Remove(filler))
			for i := 0; i < 200; i++ {
				require.Zero(t, logOne(), "room again: every record goes in")
			}
			require.NoError(t, closeChannel(ch, "close"))

			ids, lf, err := readAll(t, c.path)
			require.NoError(t, err, "nothing damaged, nothing lost")
			require.Equal(t, l.accepted, ids, "every accepted record once, in order, none of the refused")
			require.Zero(t, lf.Summary.CorruptLines+lf.Summary.CorruptFrames)
			require.Zero(t, lf.Summary.CorruptBytes+lf.Summary.TruncatedBytes)
			st := newestStatus(t, c.path)
			require.Equal(t, logfile.Status{Seq: st.Seq, Accepted: uint64(len(l.accepted) + len(l.refused)), Refused: uint64(len(l.refused)),
				Errno: uint32(syscall.ENOSPC), State: logfile.StateClosed}, st)
			require.Equal(t, &st, lf.Summary.Status)
			t.Logf("accepted %d, refused %d", len(l.accepted), len(l.refused))
		})
	}
}

// countersOf reads a counter file's periods however damaged or short it
// is (the error is the reader's word on it).
func countersOf(t *testing.T, path string) ([]logfile.CounterRecord, *logfile.File, error) {
	t.Helper()
	lf, err := logfile.Open(path)
	require.NoError(t, err)
	defer lf.Close()
	var recs []logfile.CounterRecord
	err = lf.Counters(func(r logfile.CounterRecord) error { recs = append(recs, r); return nil })
	return recs, lf, err
}

// Counter channels on a full disk lose no count: a period whose record the
// disk refuses is carried by the next record (one more skipped period), so
// a disk full for a while and then free holds every event in its periods;
// a disk full until the close says, in the status and the trailer's place
// and CloseChannel's error, how many events are not in the file. (They
// dropped the period and said nothing: 267,062,220 events, 145,191,508 in
// the file, CloseChannel 0.)
func TestCountersFullDisk(t *testing.T) {
	for _, h := range []handlers.Type{handlers.PeriodicCounter, handlers.FastPeriodicCounter, handlers.ServiceRate} {
		for _, f := range []logfile.Format{logfile.BinaryTSC, logfile.ASCIITSC} {
			for _, untilClose := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/full-until-close=%v", h, f, untilClose), func(t *testing.T) {
					dir := smallDisk(t, "64k")
					ch, c := open(t, "counter full", f, h)
					require.NoError(t, parameterize(ch, 0, 1_000_000)) // 1 ms
					events := 0
					logN := func(n int) {
						for i := 0; i < n; i++ {
							require.Zero(t, logTS(ch, int64(events)))
							events++
						}
					}
					logN(1000)
					time.Sleep(5 * time.Millisecond)
					filler := fillDisk(t, dir)
					// Periods that cannot be written, once the file's last page
					// (what still fits a full tmpfs) has filled: 300 ms of them.
					for k := 0; k < 150; k++ {
						logN(50)
						time.Sleep(2 * time.Millisecond)
					}
					if !untilClose {
						require.NoError(t, os.Remove(filler))
						logN(1000)
						time.Sleep(5 * time.Millisecond)
					}
					err := closeChannel(ch, "close")
					recs, lf, rerr := countersOf(t, c.path)
					var sum uint64
					carried := false
					for _, r := range recs {
						sum += r.Count
						carried = carried || r.Skipped > 0
					}
					st := newestStatus(t, c.path)
					require.Equal(t, uint32(syscall.ENOSPC), st.Errno, "the status keeps the disk's errno")
					if !untilClose {
						require.NoError(t, err)
						require.NoError(t, rerr)
						require.Equal(t, uint64(events), sum, "every event in the file's periods")
						require.Equal(t, uint64(events), lf.Summary.Trailer.Total)
						require.True(t, carried, "a record carries the periods the disk refused")
						require.Equal(t, logfile.StateClosed, int(st.State))
						require.Zero(t, st.Unwritten)
						return
					}
					require.Equal(t, int32(-12), codeOf(err), "%v", err)
					require.Contains(t, err.Error(), "could not be written")
					require.Equal(t, logfile.StateClosedLoss, int(st.State))
					require.Equal(t, uint64(events), st.Accepted)
					require.Equal(t, uint64(events)-sum, st.Unwritten, "unwritten = counted - in the file")
					require.Greater(t, st.Unwritten, uint64(0))
					unwritten, _ := lf.Summary.Unwritten()
					require.Equal(t, st.Unwritten, unwritten)
					require.NotEmpty(t, lf.Summary.Problems(&lf.Header), "a reader says so")
					t.Logf("%d of %d events in the file (read: %v)", sum, events, rerr)
				})
			}
		}
	}
}

// incompressible ids: zstd cannot make the frames small enough to slip
// into the last page of a full disk.
func noisyID(rng *rand.Rand, i int) int64 { return int64(i)<<24 | int64(rng.UintN(1<<24)) }

// BUFFER_IDENTITY ZSTD_TSC on a full disk that frees up: LogTS refuses (no
// position taken) while the spill waits, and once the disk has room every
// accepted record is written once; the status says closed with nothing
// unwritten.
func TestBufferedFullDiskThenRoom(t *testing.T) {
	dir := smallDisk(t, "256k")
	ch, c := open(t, "buffered full", logfile.ZstdTSC, handlers.BufferIdentity)
	rng := rand.New(rand.NewPCG(3, 4))
	filler := fillDisk(t, dir)
	l := &idLog{t: t, ch: ch}
	i := 0
	logOne := func() int32 { i++; return l.log(noisyID(rng, i)) }
	for deadline := time.Now().Add(20 * time.Second); len(l.refused) == 0; {
		require.True(t, time.Now().Before(deadline), "a full disk makes LogTS refuse")
		for k := 0; k < 512; k++ {
			logOne()
		}
		time.Sleep(5 * time.Millisecond)
	}
	held := waitStatus(t, c.path, func(st logfile.Status) bool { return st.Unwritten > 0 }, "the status says what waits for the disk")
	require.Equal(t, uint32(syscall.ENOSPC), held.Errno)
	require.Less(t, held.Written, held.Accepted)
	require.NoError(t, os.Remove(filler))
	for deadline := time.Now().Add(10 * time.Second); logOne() != 0; time.Sleep(20 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the channel takes events again once the spill is written")
	}
	for k := 0; k < 3000; k++ {
		require.Zero(t, logOne())
	}
	require.NoError(t, closeChannel(ch, "close"))
	ids, lf, err := readAll(t, c.path)
	require.NoError(t, err)
	require.Equal(t, l.accepted, ids, "every accepted record once, in order")
	st := newestStatus(t, c.path)
	n := uint64(len(l.accepted))
	require.Equal(t, logfile.Status{Seq: st.Seq, Accepted: n, Written: n, Errno: uint32(syscall.ENOSPC), State: logfile.StateClosed}, st)
	require.Equal(t, &st, lf.Summary.Status)
	t.Logf("accepted %d, refused %d while full", len(l.accepted), len(l.refused))
}

// BUFFER_IDENTITY ZSTD_TSC with the disk full until the close: the close
// reports the loss, and the status (written in place, with no room for the
// trailer) says closed with loss and exactly how many accepted records are
// not in the file.
func TestBufferedFullDiskUntilClose(t *testing.T) {
	dir := smallDisk(t, "256k")
	ch, c := open(t, "full at close", logfile.ZstdTSC, handlers.BufferIdentity)
	rng := rand.New(rand.NewPCG(8, 9))
	const n = 5000
	logged := map[int64]bool{}
	for i := 0; i < n; i++ {
		id := noisyID(rng, i)
		logged[id] = true
		require.Zero(t, logTS(ch, id))
	}
	fillDisk(t, dir)
	err := closeChannel(ch, "close")
	require.Equal(t, int32(-12), codeOf(err), "%v", err)
	require.Contains(t, err.Error(), "could not be written")

	ids, lf, rerr := readAll(t, c.path)
	require.ErrorIs(t, rerr, logfile.ErrDamaged, "the reader says records are lost")
	for _, id := range ids {
		require.True(t, logged[id], "id %d was never logged", id)
		delete(logged, id)
	}
	st := newestStatus(t, c.path)
	require.Equal(t, logfile.StateClosedLoss, int(st.State))
	require.Equal(t, uint64(n), st.Accepted)
	require.Greater(t, st.Unwritten, uint64(0))
	require.Equal(t, uint64(n-len(ids)), st.Unwritten, "unwritten = accepted - in the file")
	require.Equal(t, uint32(syscall.ENOSPC), st.Errno)
	require.Equal(t, &st, lf.Summary.Status)
	unwritten, _ := lf.Summary.Unwritten()
	require.Equal(t, st.Unwritten, unwritten)
	t.Logf("%d of %d in the file, trailer written: %v", len(ids), n, lf.Summary.Trailer != nil)
}

// The SIGTERM flusher's frames are sealed like every other, a write of it
// that fails part way is cut back, and it leaves a status saying the
// process was flushed on SIGTERM with what was accepted and, on a full
// disk, what it could not write.
func TestSigtermFlushStatus(t *testing.T) {
	for _, full := range []bool{false, true} {
		name := "room"
		if full {
			name = "full"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if full {
				dir = smallDisk(t, "64k")
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestSigtermChild$", "-test.count=1", "-test.v")
			fill := "0"
			if full {
				fill = "1"
			}
			cmd.Env = append(os.Environ(), "CP_TEST_CHILD=1", "CP_TEST_DIR="+dir, "CP_TEST_FILL="+fill)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "the child dies of SIGTERM: %v\n%s", err, out)
			ws := ee.Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGTERM, "%v\n%s", err, out)

			for _, f := range []string{"sig_ring.cplog", "sig_identity.cplog.txt"} {
				m, err := filepath.Glob(filepath.Join(dir, "*-"+f))
				require.NoError(t, err)
				require.Len(t, m, 1, f)
				ids, lf, _ := readAll(t, m[0])
				require.Zero(t, lf.Summary.CorruptLines+lf.Summary.CorruptFrames, f)
				require.Zero(t, lf.Summary.CorruptBytes+lf.Summary.TruncatedBytes, f)
				st := newestStatus(t, m[0])
				require.Equal(t, logfile.StateSignal, int(st.State), f)
				require.Equal(t, uint64(sigChildN), st.Accepted, f)
				require.Equal(t, &st, lf.Summary.Status, f)
				for i, id := range ids {
					require.Equal(t, int64(i), id, f)
				}
				if f == "sig_identity.cplog.txt" || !full {
					require.Len(t, ids, sigChildN, "%s: written at once, or by the flush", f)
					require.Zero(t, st.Unwritten, f)
					continue
				}
				require.Greater(t, st.Unwritten, uint64(0), f)
				require.Equal(t, uint64(sigChildN-len(ids)), st.Unwritten, "%s: unwritten = accepted - in the file", f)
			}
		})
	}
}

const sigChildN = 900 // less than a block: the flush writes them

func TestSigtermChild(t *testing.T) {
	child(t)
	sigtermDefault() // the library's handler chains to the default: it closes, flushes, dies
	require.NoError(t, initLibrary())
	cfg.logDir = os.Getenv("CP_TEST_DIR")
	ring, _ := open(t, "sig ring", logfile.BinaryTSC, handlers.BufferIdentity)
	ident, _ := open(t, "sig identity", logfile.ASCIITSC, handlers.Identity)
	for i := 0; i < sigChildN; i++ {
		require.Zero(t, logTS(ring, int64(i)))
		require.Zero(t, logTS(ident, int64(i)))
	}
	if os.Getenv("CP_TEST_FILL") == "1" {
		os.WriteFile(filepath.Join(cfg.logDir, "filler"), make([]byte, 64<<20), 0o644)
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	time.Sleep(10 * time.Second)
	t.Fatal("still alive after SIGTERM")
}

// Someone who can write the log directory renames a symlink over each new
// channel file, racing OpenChannel: the library writes through the file it
// created only (the status's second descriptor is reopened from the first,
// not by the path), so the symlink's target is never touched. (By path,
// 2-157 of 1,000 opens wrote status frames into the target.)
func TestOpenChannelSymlinkRace(t *testing.T) {
	require.NoError(t, initLibrary())
	dir := t.TempDir()
	old := cfg.logDir
	cfg.logDir = dir
	t.Cleanup(func() { cfg.logDir = old })
	target := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(target, []byte("victim"), 0o644))
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		swapped := 0
		defer func() { done <- swapped }()
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Type()&os.ModeSymlink != 0 || !strings.HasSuffix(e.Name(), ".cplog") {
					continue
				}
				link := filepath.Join(dir, fmt.Sprintf(".link-%d", k))
				if os.Symlink(target, link) == nil && os.Rename(link, filepath.Join(dir, e.Name())) == nil {
					swapped++
				}
			}
			runtime.Gosched()
		}
	}()
	opened := 0
	for i := 0; i < 1000; i++ {
		ch, err := openChannel("race", logfile.BinaryTSC, handlers.BufferIdentity)
		if err != nil {
			continue
		}
		opened++
		require.Zero(t, logTS(ch, int64(i)))
		closeChannel(ch, "close")
	}
	close(stop)
	swapped := <-done
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "victim", string(b), "the symlink's target was written (%d opens, %d names swapped)", opened, swapped)
	t.Logf("%d of 1000 opens, %d file names replaced by a symlink", opened, swapped)
}

// A log directory others can write is said to be one (once, on stderr).
func TestOpenDirWritableByOthersWarns(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700))
	require.Empty(t, openDirProblem(dir))
	require.NoError(t, unix.Chmod(dir, 0o1777)) // os.Chmod takes os.ModeSticky, not 0o1000
	require.Contains(t, openDirProblem(dir), "mode 1777) is writable by others")
	require.NoError(t, os.Chmod(dir, 0o775))
	require.Contains(t, openDirProblem(dir), "writable by its group")
}
