package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDumpErrors(t *testing.T) {
	var out, errb bytes.Buffer
	require.Error(t, dump(&out, &errb, nil), "no file")
	foreign := filepath.Join(t.TempDir(), "foreign")
	require.NoError(t, os.WriteFile(foreign, []byte("PK\x03\x04 a zip file"), 0o644))
	require.Error(t, dump(&out, &errb, []string{"--csv", foreign}))
	require.Contains(t, errb.String(), "not a Cloudprofiler log file")
	require.Error(t, dump(&out, &errb, []string{filepath.Join(t.TempDir(), "missing")}))
	require.Contains(t, errb.String(), "no such file")
}

func TestDumpASCIIFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.cplog.txt")
	content := "#CLOUDPROFILER-LOG v1\n" +
		`#header {"version":1,"byte_order":"little","format":"ASCII_TSC","format_id":1,"handler":"BUFFER_IDENTITY","handler_id":1,"record_size":16}` + "\n" +
		"#block 2 2\n5,300\n#hole\n#block 0 2\n3,100\n4,200\n"
	require.NoError(t, os.WriteFile(p, []byte(content+`#trailer {"reason":"close","positions":4}`+"\n"), 0o644))
	var out, errb bytes.Buffer
	require.NoError(t, dump(&out, &errb, []string{"--csv", p}))
	require.Equal(t, "tuple_id,tsc\n3,100\n4,200\n5,300\n", out.String())
	out.Reset()
	require.NoError(t, dump(&out, &errb, []string{p}))
	require.Contains(t, out.String(), "records:    3 in 2 frames")
	require.Contains(t, out.String(), "1 holes")
	require.Empty(t, errb.String())

	// Without its trailer, and with a line that is not a record: every valid
	// record is printed, each problem said on stderr, exit status 3.
	require.NoError(t, os.WriteFile(p, []byte(content+"6,x00\n"), 0o644))
	out.Reset()
	err := dump(&out, &errb, []string{"--csv", p})
	require.Equal(t, "tuple_id,tsc\n3,100\n4,200\n5,300\n", out.String())
	var ec *exitCode
	require.ErrorAs(t, err, &ec)
	require.Equal(t, exitDamaged, ec.code)
	require.Contains(t, errb.String(), "1 damaged lines skipped")
	require.Contains(t, errb.String(), "no trailer: the channel was not closed")
}

// A SERVICERATE file's converged estimates are events: dump says the rate.
func TestDumpServiceRateEvent(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.cplog.txt")
	content := "#CLOUDPROFILER-LOG v1\n" +
		`#header {"version":1,"byte_order":"little","format":"ASCII_TSC","format_id":1,"handler":"SERVICERATE","handler_id":14,"record_size":16}` + "\n" +
		`#event {"event":"service_rate","sync":{"tsc":123456,"tsc_width":10,"mono_raw_ns":1,"realtime_ns":2},"rate":19876.5,"period_ns":4000000,"samples":19}` + "\n" +
		`#trailer {"reason":"close","positions":0}` + "\n"
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	var out, errb bytes.Buffer
	require.NoError(t, dump(&out, &errb, []string{p}))
	require.Contains(t, out.String(), "event:      service_rate 19876.5 items/s (period 4ms, 19 estimates averaged) at tsc 123456")
}

// A marked channel's notes of its thread's waits (bit 63 of a record's TSC,
// the header's "waits"): taken off the TSC, counted in the summary, and a
// waited column with --csv --waits only.
func TestDumpWaits(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.cplog.txt")
	content := "#CLOUDPROFILER-LOG v1\n" +
		`#header {"version":1,"byte_order":"little","format":"ASCII_TSC","format_id":1,"handler":"BUFFER_IDENTITY","handler_id":1,"record_size":16,"block_records":4,"name":"op#1 in","waits":"rseq"}` + "\n" +
		"#block 0 3\n1,9223372036854775908\n2,200\n3,9223372036854776108\n" + `#trailer {"reason":"close","positions":3}` + "\n"
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	var out, errb bytes.Buffer
	require.NoError(t, dump(&out, &errb, []string{"--csv", p}), errb.String())
	require.Equal(t, "tuple_id,tsc\n1,100\n2,200\n3,300\n", out.String())
	out.Reset()
	require.NoError(t, dump(&out, &errb, []string{"--csv", "--waits", p}))
	require.Equal(t, "tuple_id,tsc,waited\n1,100,1\n2,200,0\n3,300,1\n", out.String())
	out.Reset()
	require.NoError(t, dump(&out, &errb, []string{p}))
	require.Contains(t, out.String(), "waits:      2 records after their instance's thread waited (seen by rseq)")
	require.Empty(t, errb.String())
}
