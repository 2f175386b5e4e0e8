// Package udppipe runs pipelines of processes over UDP on loopback
// (examples/pipeline/udpstage.c) for the end-to-end tests of the
// capacity analysis and Mace, and works the truth of a run out of the
// records the run logged: what each operator instance really did, read
// with `cloudprofiler dump --csv`, by code that shares nothing with the
// analysis (docs/capacity.md, "How we know it is right").
//
// No real-time priority, no pinning: the machine is as shared as a cloud
// VM, and a test may keep another process spinning beside the pipeline
// (Pipeline.Hog).
package udppipe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Stage is one process of a pipeline.
type Stage struct {
	Kind string   // "source", "op" or "sink"
	Name string   // its channels' OPERATOR[#INSTANCE]: "mix", "mix#1"
	Args []string // its flags beyond --listen and --to: "--work-us", "15", ...
	To   []string // the stages it sends to (several: the ids go to each in turn)
}

// Pipeline is the stages and what runs beside them.
type Pipeline struct {
	Stages []Stage
	// Hog keeps a process spinning on the machine for the run: another
	// tenant of a 2-vCPU VM.
	Hog bool
	// Env is added to every stage's environment (CP_LOG_DIR is set).
	Env []string
}

// Run is how a run went.
type Run struct {
	Logs  string
	Stats map[string]map[string]float64 // per stage: its JSON line's numbers
	Took  time.Duration
}

// freePort is a UDP port on loopback nobody has bound right now.
func freePort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// Run runs the pipeline with udpstage, its channels' files in logs (made
// if missing), and waits for every stage to end, killing them all after
// limit. An error names the stage that failed and what it printed.
func (p Pipeline) Run(udpstage, logs string, limit time.Duration) (*Run, error) {
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	ports := map[string]int{}
	for _, s := range p.Stages {
		if s.Kind != "source" {
			port, err := freePort()
			if err != nil {
				return nil, err
			}
			ports[s.Name] = port
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	type proc struct {
		s        Stage
		cmd      *exec.Cmd
		out, err bytes.Buffer
	}
	start := func(s Stage) (*proc, error) {
		args := []string{s.Kind, s.Name}
		if port, ok := ports[s.Name]; ok {
			args = append(args, "--listen", strconv.Itoa(port))
		}
		if len(s.To) > 0 {
			var to []string
			for _, n := range s.To {
				port, ok := ports[n]
				if !ok {
					return nil, fmt.Errorf("udppipe: stage %s sends to %q, which is no op or sink of the pipeline", s.Name, n)
				}
				to = append(to, strconv.Itoa(port))
			}
			args = append(args, "--to", strings.Join(to, ","))
		}
		args = append(args, s.Args...)
		pr := &proc{s: s, cmd: exec.CommandContext(ctx, udpstage, args...)}
		pr.cmd.Env = append(append(os.Environ(), "CP_LOG_DIR="+logs), p.Env...)
		pr.cmd.Stdout, pr.cmd.Stderr = &pr.out, &pr.err
		pr.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		pr.cmd.WaitDelay = 5 * time.Second
		return pr, pr.cmd.Start()
	}
	var hog *exec.Cmd
	if p.Hog {
		hog = exec.CommandContext(ctx, udpstage, "burn", fmt.Sprint(limit.Seconds()))
		if err := hog.Start(); err != nil {
			return nil, err
		}
		defer func() {
			hog.Process.Kill()
			hog.Wait()
		}()
	}
	// Sinks first, then the operators from the end, then the sources: a
	// stage listens before anything is sent to it.
	var procs []*proc
	var startErr error
	order := append([]Stage(nil), p.Stages...)
	rank := map[string]int{"sink": 0, "op": 1, "source": 2}
	sort.SliceStable(order, func(i, j int) bool { return rank[order[i].Kind] < rank[order[j].Kind] })
	for i, s := range order {
		if s.Kind == "source" && (i == 0 || order[i-1].Kind != "source") {
			time.Sleep(300 * time.Millisecond) // the ops calibrate their work, then listen
		}
		pr, err := start(s)
		if err != nil {
			startErr = fmt.Errorf("udppipe: start %s: %w", s.Name, err)
			break
		}
		procs = append(procs, pr)
	}
	t0 := time.Now()
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, pr := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pr.cmd.Wait()
		}()
	}
	if startErr != nil {
		cancel()
	}
	wg.Wait()
	run := &Run{Logs: logs, Stats: map[string]map[string]float64{}, Took: time.Since(t0)}
	for i, pr := range procs {
		if errs[i] != nil {
			return run, fmt.Errorf("udppipe: %s %s: %v (after %s)\n%s%s", pr.s.Kind, pr.s.Name, errs[i], time.Since(t0).Round(time.Millisecond), pr.out.String(), pr.err.String())
		}
		var m map[string]any
		if err := json.Unmarshal(bytes.TrimSpace(pr.out.Bytes()), &m); err != nil {
			return run, fmt.Errorf("udppipe: %s %s printed no JSON line: %q", pr.s.Kind, pr.s.Name, pr.out.String())
		}
		st := map[string]float64{}
		for k, v := range m {
			if f, ok := v.(float64); ok {
				st[k] = f
			}
		}
		run.Stats[pr.s.Name] = st
	}
	return run, startErr
}

// Rec is one record: a tuple id and its TSC.
type Rec struct {
	ID  int64
	TSC uint64
}

// Records are a run's records by channel name, read with the tool's dump.
type Records struct {
	Hz   float64 // TSC cycles a second (every process of one machine shares the TSC)
	T0   uint64  // the run's first record
	Chan map[string][]Rec
}

var (
	channelLine = regexp.MustCompile(`(?m)^channel:\s+\d+ "(.*)"`)
	tscLine     = regexp.MustCompile(`(?m)^tsc:\s+([0-9.]+) GHz`)
)

// Read reads every channel file in logs with `tool dump` (its header:
// the channel's name and TSC frequency) and `tool dump --csv` (the
// records).
func Read(tool, logs string) (*Records, error) {
	files, err := filepath.Glob(filepath.Join(logs, "*.cplog"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("udppipe: no channel files in %s (%v)", logs, err)
	}
	r := &Records{Chan: map[string][]Rec{}, T0: math.MaxUint64}
	for _, f := range files {
		head, err := exec.Command(tool, "dump", f).Output()
		if err != nil {
			return nil, fmt.Errorf("udppipe: dump %s: %v", f, err)
		}
		name := channelLine.FindSubmatch(head)
		hz := tscLine.FindSubmatch(head)
		if name == nil || hz == nil {
			return nil, fmt.Errorf("udppipe: dump %s: no channel or tsc line:\n%s", f, head)
		}
		g, _ := strconv.ParseFloat(string(hz[1]), 64)
		r.Hz = g * 1e9
		out, err := exec.Command(tool, "dump", "--csv", f).Output()
		if err != nil {
			return nil, fmt.Errorf("udppipe: dump --csv %s: %v", f, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Scan() // tuple_id,tsc
		var recs []Rec
		for sc.Scan() {
			a, b, ok := strings.Cut(sc.Text(), ",")
			if !ok {
				continue
			}
			id, err1 := strconv.ParseInt(a, 10, 64)
			tsc, err2 := strconv.ParseUint(strings.SplitN(b, ",", 2)[0], 10, 64)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("udppipe: %s: a bad line %q", f, sc.Text())
			}
			recs = append(recs, Rec{id, tsc})
			r.T0 = min(r.T0, tsc)
		}
		r.Chan[string(name[1])] = append(r.Chan[string(name[1])], recs...)
	}
	return r, nil
}

// Truth is what an operator instance did while backlogged: the visits it
// took while its next tuple was already handed off to it (the hand-off
// record no later than its previous departure), and the time from the
// previous departure to theirs: its departures per second while
// backlogged.
type Truth struct {
	Visits     int // all its visits
	Backlogged int
	Seconds    float64
	// Rate is Backlogged / Seconds: tuples it takes and finishes a second
	// while backlogged (NaN: never backlogged).
	Rate float64
}

func (t *Truth) add(dt float64) {
	t.Backlogged++
	t.Seconds += dt
	t.Rate = float64(t.Backlogged) / t.Seconds
}

// Backlogged is instance inst's truth (its channels "INST in" and "INST
// out", and "INST sent" where it marks them: then a visit departs at its
// sent), its hand-offs the records of the channels up (the upstream's
// departures: the k-th in of an id at inst takes the k-th of its records
// there, by time), over the run and per window of the given seconds from
// T0 (the window of a visit's in).
func (r *Records) Backlogged(inst string, up []string, window float64) (Truth, map[int]*Truth) {
	run, groups := r.BackloggedBy(inst, up, func(_ int, in uint64) int {
		return int(float64(in-r.T0) / r.Hz / window)
	})
	return run, groups
}

// BackloggedBy is Backlogged with the visits grouped by group (of the
// visit's number in time order and its in).
func (r *Records) BackloggedBy(inst string, up []string, group func(k int, in uint64) int) (Truth, map[int]*Truth) {
	ins, outs := r.Chan[inst+" in"], r.Chan[inst+" out"]
	if sent := r.Chan[inst+" sent"]; len(sent) > 0 {
		outs = append(append([]Rec(nil), outs...), sent...)
	}
	hand := map[int64][]uint64{}
	for _, u := range up {
		for _, x := range r.Chan[u] {
			hand[x.ID] = append(hand[x.ID], x.TSC)
		}
	}
	for _, h := range hand {
		sort.Slice(h, func(i, j int) bool { return h[i] < h[j] })
	}
	type ev struct {
		tsc uint64
		id  int64
		in  bool
	}
	var evs []ev
	for _, x := range ins {
		evs = append(evs, ev{x.TSC, x.ID, true})
	}
	for _, x := range outs {
		evs = append(evs, ev{x.TSC, x.ID, false})
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].tsc < evs[j].tsc })
	// Visits: an in, and the outs after it up to the next in.
	type visit struct {
		in, dep, h uint64
		hasH       bool
	}
	var vs []visit
	seen := map[int64]int{}
	for _, e := range evs {
		if e.in {
			v := visit{in: e.tsc, dep: e.tsc}
			k := seen[e.id]
			seen[e.id]++
			if h := hand[e.id]; k < len(h) {
				v.h, v.hasH = h[k], true
			}
			vs = append(vs, v)
		} else if len(vs) > 0 {
			vs[len(vs)-1].dep = e.tsc
		}
	}
	var run Truth
	run.Rate = math.NaN()
	wins := map[int]*Truth{}
	run.Visits = len(vs)
	for k := 1; k < len(vs); k++ {
		v, prev := vs[k], vs[k-1]
		if !v.hasH || v.h > prev.dep || v.dep < prev.dep {
			continue
		}
		dt := float64(v.dep-prev.dep) / r.Hz
		run.add(dt)
		w := group(k, v.in)
		if wins[w] == nil {
			wins[w] = &Truth{Rate: math.NaN()}
		}
		wins[w].add(dt)
	}
	return run, wins
}

// OwnRate is instance inst's visits over their own time, in to its last
// out (or sent), per second.
func (r *Records) OwnRate(inst string) float64 {
	var secs float64
	n := 0
	last := map[int64]uint64{}
	for _, c := range []string{inst + " out", inst + " sent"} {
		for _, x := range r.Chan[c] {
			last[x.ID] = max(last[x.ID], x.TSC)
		}
	}
	for _, x := range r.Chan[inst+" in"] {
		if d, ok := last[x.ID]; ok && d >= x.TSC {
			secs += float64(d-x.TSC) / r.Hz
			n++
		}
	}
	return float64(n) / secs
}

// Copies counts, for each id, the records of the channels: how many
// copies of it passed there.
func (r *Records) Copies(chans ...string) map[int64]int {
	m := map[int64]int{}
	for _, c := range chans {
		for _, x := range r.Chan[c] {
			m[x.ID]++
		}
	}
	return m
}

// Lost counts the copies that left the channels from (an operator's outs)
// and never reached the channels to (the next operator's ins): per id,
// what left less what arrived, where more left.
func (r *Records) Lost(from, to []string) int {
	a, b := r.Copies(from...), r.Copies(to...)
	lost := 0
	for id, n := range a {
		if n > b[id] {
			lost += n - b[id]
		}
	}
	return lost
}

// Span is the seconds from the first to the last record of the channels.
func (r *Records) Span(chans ...string) float64 {
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for _, c := range chans {
		for _, x := range r.Chan[c] {
			lo, hi = min(lo, x.TSC), max(hi, x.TSC)
		}
	}
	if hi <= lo {
		return 0
	}
	return float64(hi-lo) / r.Hz
}
