package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"syscall"
	"time"

	"cloudprofiler/internal/logfile"
)

// dump decodes files. With --csv: a header line and one line per record in
// logged order; without: the file header and a summary.
func dump(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	csv := fs.Bool("csv", false, "print records as CSV (tuple_id,tsc[,mono_ns]; counters: period_end_tsc,count,skipped_periods[,mono_ns])")
	counters := fs.Bool("counters", false, "print the counter records of a NET_CONF channel's file (counter channels print them anyway)")
	waits := fs.Bool("waits", false, "with --csv: a last column, waited (1: the record's instance's thread waited since its previous mark), for files whose records note waits")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("dump: no FILE given")
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	defer w.Flush()
	failed, damaged := 0, 0
	for _, path := range fs.Args() {
		err := dumpOne(w, stderr, path, *csv, *counters, *waits)
		switch {
		case errors.Is(err, logfile.ErrDamaged):
			damaged++ // its problems are on stderr already, one line each
		case err != nil:
			w.Flush()
			fmt.Fprintln(stderr, "cloudprofiler: dump:", err)
			failed++
		}
	}
	switch {
	case failed > 0:
		return fmt.Errorf("dump: %d file(s) could not be decoded", failed)
	case damaged > 0:
		return &exitCode{exitDamaged, fmt.Sprintf("dump: %d file(s) damaged or incomplete: every valid record was printed, the lines above say what is missing", damaged)}
	}
	return nil
}

// exitDamaged is dump's (and analyze --strict's) exit status for files that
// were read but are damaged or miss records they accepted.
const exitDamaged = 3

func dumpOne(w *bufio.Writer, stderr io.Writer, path string, csv, counters, waitsCol bool) error {
	lf, err := logfile.Open(path)
	if err != nil {
		return err
	}
	defer lf.Close()
	h := &lf.Header
	mono := logfile.Format(h.FormatID).HasMono()
	notes := h.Waits != "" && !h.Counter()
	waits := notes && waitsCol
	var buf []byte
	var first, last uint64
	var waited uint64
	// row ends a CSV line begun in buf (its mono column, if any) and writes
	// it; it also keeps the first and last TSC for the summary.
	row := func(tsc, monoNs uint64, wait bool) error {
		if first == 0 {
			first = tsc
		}
		last = tsc
		if !csv {
			return nil
		}
		if mono {
			buf = append(buf, ',')
			buf = strconv.AppendUint(buf, monoNs, 10)
		}
		if waits {
			buf = append(buf, ",0"...)
			if wait {
				buf[len(buf)-1] = '1'
			}
		}
		_, err := w.Write(append(buf, '\n'))
		return err
	}
	counterFile := h.Counter() || counters
	if csv {
		if counterFile {
			w.WriteString("period_end_tsc,count,skipped_periods")
		} else {
			w.WriteString("tuple_id,tsc")
		}
		if mono {
			w.WriteString(",mono_ns")
		}
		if waits {
			w.WriteString(",waited")
		}
		w.WriteByte('\n')
	}
	if counterFile {
		err = lf.Counters(func(c logfile.CounterRecord) error {
			buf = strconv.AppendUint(buf[:0], c.TSC, 10)
			buf = append(buf, ',')
			buf = strconv.AppendUint(buf, c.Count, 10)
			buf = append(buf, ',')
			buf = strconv.AppendUint(buf, c.Skipped, 10)
			return row(c.TSC, c.MonoNs, false)
		})
	} else {
		err = lf.Records(func(r logfile.Record) error {
			buf = strconv.AppendInt(buf[:0], r.TupleID, 10)
			buf = append(buf, ',')
			buf = strconv.AppendUint(buf, r.TSC, 10)
			if r.Waited {
				waited++
			}
			return row(r.TSC, r.MonoNs, r.Waited)
		})
	}
	if errors.Is(err, logfile.ErrDamaged) {
		w.Flush()
		for _, p := range lf.Summary.Problems(h) {
			fmt.Fprintf(stderr, "cloudprofiler: dump: %s: %s\n", path, p)
		}
	}
	if !csv {
		printSummary(w, path, lf, first, last)
		if notes {
			fmt.Fprintf(w, "waits:      %d records after their instance's thread waited (seen by %s)\n", waited, h.Waits)
		}
	}
	return err
}

func printSummary(w *bufio.Writer, path string, lf *logfile.File, first, last uint64) {
	h, s := &lf.Header, &lf.Summary
	fmt.Fprintf(w, "file:       %s\n", path)
	fmt.Fprintf(w, "channel:    %d %q (host %s, pid %d)\n", h.Channel, h.Name, h.Host, h.PID)
	if h.Node != "" {
		fmt.Fprintf(w, "node:       %s\n", h.Node)
	}
	if h.TSCDomain != "" {
		fmt.Fprintf(w, "tsc domain: %s\n", h.TSCDomain)
	}
	if h.Run != "" {
		fmt.Fprintf(w, "run:        %s\n", h.Run)
	}
	fmt.Fprintf(w, "handler:    %s %v\n", h.Handler, h.Args)
	if c := h.Conf; c != nil {
		fmt.Fprintf(w, "conf:       %s from %q (rule %q, version %d)", c.Handler, c.Server, c.Rule, c.Version)
		if c.Fallback != "" {
			fmt.Fprintf(w, "; FALLBACK: %s", c.Fallback)
		}
		fmt.Fprintln(w)
	}
	if f := h.Fox; f != nil {
		switch f.Role {
		case "start":
			fmt.Fprintf(w, "fox:        start; ReTACKs received on %s, logged in %s\n", f.Listen, f.ReturnFile)
			if f.Registered != "" {
				fmt.Fprintf(w, "fox:        registered with the configuration server: %s\n", f.Registered)
			}
		case "return":
			fmt.Fprintf(w, "fox:        return log of %s (ReTACKs received on %s): tuple_id,tsc of each arrival\n", f.StartFile, f.Listen)
		default:
			fmt.Fprintf(w, "fox:        %s; ReTACKs sent to %s (%s)", f.Role, f.Start, f.StartAddr)
			if f.StartFoundVia != "" {
				fmt.Fprintf(w, ", found via %s", f.StartFoundVia)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "format:     %s (v%d, %s-endian, columns %v)\n", h.Format, h.Version, h.ByteOrder, h.Columns)
	fmt.Fprintf(w, "tsc:        %.6f GHz (%s)\n", h.TSCHz/1e9, h.TSCHzSource)
	fmt.Fprintf(w, "opened:     %s (tsc %d)\n", time.Unix(0, h.OpenSync.RealtimeNs).UTC().Format(time.RFC3339Nano), h.OpenSync.TSC)
	fmt.Fprintf(w, "library:    %s\n", h.Library)
	fmt.Fprintf(w, "records:    %d in %d frames", s.Records, s.Frames)
	if s.SignalFrames > 0 {
		fmt.Fprintf(w, " (%d written by the SIGTERM flush)", s.SignalFrames)
	}
	fmt.Fprintln(w)
	if s.Records > 0 && h.TSCHz > 0 {
		fmt.Fprintf(w, "span:       %.6f s (tsc %d .. %d)\n", float64(last-first)/h.TSCHz, first, last)
	}
	if st := s.Status; st != nil {
		fmt.Fprintf(w, "status:     %s; accepted %d, written %d, unwritten %d, refused with an I/O error %d, dropped %d (update %d)",
			st.StateName(), st.Accepted, st.Written, st.Unwritten, st.Refused, st.Dropped, st.Seq)
		if st.Errno != 0 {
			fmt.Fprintf(w, ", last write error: %v", syscall.Errno(st.Errno))
		}
		fmt.Fprintln(w)
	}
	for _, p := range s.Problems(h) {
		fmt.Fprintf(w, "PROBLEM:    %s\n", p)
	}
	if s.Holes+s.Duplicates+s.MissingPos > 0 {
		fmt.Fprintf(w, "anomalies:  %d holes, %d duplicates dropped, %d positions missing\n", s.Holes, s.Duplicates, s.MissingPos)
	}
	for _, ev := range s.Events {
		fmt.Fprintf(w, "event:      %s", ev.Event)
		if ev.Handler != "" {
			fmt.Fprintf(w, " to %s (rule %q, version %d)", ev.Handler, ev.Rule, ev.Version)
		}
		if ev.Event == "service_rate" {
			// A converged Beard & Chamberlain estimate (SERVICERATE).
			fmt.Fprintf(w, " %.6g items/s (period %s, %d estimates averaged)", ev.Rate, time.Duration(ev.PeriodNs), ev.Samples)
			if ev.Sync != nil {
				fmt.Fprintf(w, " at tsc %d", ev.Sync.TSC)
			}
		} else {
			fmt.Fprintf(w, " args=%v total=%d pos=%d", ev.Args, ev.Total, ev.Pos)
		}
		if ev.Unwritten > 0 {
			fmt.Fprintf(w, " UNWRITTEN %d (the disk was failing)", ev.Unwritten)
		}
		fmt.Fprintln(w)
	}
	if t := s.Trailer; t != nil {
		fmt.Fprintf(w, "closed:     %s at %s; positions %d, total %d, dropped %d, holes %d",
			t.Reason, time.Unix(0, t.CloseSync.RealtimeNs).UTC().Format(time.RFC3339Nano), t.Positions, t.Total, t.Dropped, t.Holes)
		if t.Unwritten > 0 {
			fmt.Fprintf(w, ", UNWRITTEN %d (%s)", t.Unwritten, t.WriteError)
		}
		fmt.Fprintln(w)
		if f := t.Fox; f != nil {
			if h.Fox != nil && h.Fox.Role == "end" {
				fmt.Fprintf(w, "retacks:    %d sent, %d not sent\n", f.Sent, f.SendFailed)
			} else {
				fmt.Fprintf(w, "retacks:    %d received, %d malformed dropped, %d dropped by the socket\n", f.Received, f.Malformed, f.KernelDrop)
			}
		}
		if d := float64(t.CloseSync.TSC - h.OpenSync.TSC); d > 0 && t.CloseSync.MonoRawNs > h.OpenSync.MonoRawNs {
			fmt.Fprintf(w, "tsc check:  %.6f GHz between the open and close sync points\n", d/float64(t.CloseSync.MonoRawNs-h.OpenSync.MonoRawNs))
		}
	} else {
		fmt.Fprintln(w, "closed:     no trailer (the process ended without closing the channel)")
	}
	if s.TruncatedBytes > 0 {
		fmt.Fprintf(w, "truncated:  %d bytes after the last whole frame", s.TruncatedBytes)
		if s.TornAfterSignal(&lf.Header) {
			fmt.Fprint(w, " (a write the process's death cut short after its SIGTERM flush: nothing is missing)")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}
