// Package minrtt turns round-trip probes between nodes into one reference
// TSC: the rounds file that the TSC server writes (this file), and the
// translation of TSC values and durations between nodes with strict error
// bounds (paper sections 3.2 and 3.3). It is pure Go: no cgo.
package minrtt

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// RoundFormat and RoundVersion identify a rounds file (ROUNDS.md).
const (
	RoundFormat  = "cloudprofiler-minrtt-round"
	RoundVersion = 1
)

// Probe is one round trip started by the origin node: the origin read Send
// just before sending, the responder read Resp after the probe arrived and
// before it answered, and the origin read Recv after the answer arrived. So
// the responder's Resp happened, in the origin's counter, within [Send, Recv].
// Send and Recv are in the origin's TSC, Resp in the responder's.
type Probe struct {
	Send, Resp, Recv uint64
}

// RTT is the probe's round trip in the origin's cycles.
func (p Probe) RTT() uint64 { return p.Recv - p.Send }

// MarshalJSON writes a probe as [send, resp, recv]: compact, exact for uint64.
func (p Probe) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("[%d,%d,%d]", p.Send, p.Resp, p.Recv)), nil
}

// UnmarshalJSON reads [send, resp, recv].
func (p *Probe) UnmarshalJSON(b []byte) error {
	var a []uint64
	if err := json.Unmarshal(b, &a); err != nil || len(a) != 3 {
		return fmt.Errorf("probe must be [send, resp, recv], got %s", b)
	}
	p.Send, p.Resp, p.Recv = a[0], a[1], a[2]
	return nil
}

// Node is a client as it registered with the TSC server.
type Node struct {
	Name        string  `json:"name"`
	Host        string  `json:"host"`
	PID         int     `json:"pid"`
	Addr        string  `json:"addr"` // UDP address it answers probes on
	TSCHz       float64 `json:"tsc_hz"`
	TSCHzSource string  `json:"tsc_hz_source"`
	// TSCDomain is the counter the client reads (tsc.Domain); "" when
	// unknown. Log files of the node must come from the same one.
	TSCDomain string `json:"tsc_domain,omitempty"`
	// ProbeVersion is the newest probe packet version the client answers:
	// 2 with kernel timestamps; 0 (omitted) or 1 without.
	ProbeVersion int `json:"probe_version,omitempty"`
	// Timestamping is what the interface the client probes on can
	// timestamp, as the client found it (ethtool's capabilities), for
	// people; "" when it did not look.
	Timestamping string `json:"timestamping,omitempty"`
}

// Direction is every probe one node (Origin) sent to another (Responder) in
// a round. Sent counts probes sent; Probes holds the answered ones, in order.
type Direction struct {
	Origin    string  `json:"origin"`
	Responder string  `json:"responder"`
	Sent      int     `json:"sent"`
	Probes    []Probe `json:"probes"`
	Error     string  `json:"error,omitempty"` // why the direction is short or empty
	// Timestamps says how the probes were timed: "user" (or omitted: the
	// processes read the counter around each send and receive), or
	// "kernel" (the kernels' software timestamps of each packet, placed
	// on the counters, for KernelProbes of Probes, the others as the
	// processes timed them), with why where the kernel's were wanted and
	// not had.
	Timestamps   string `json:"timestamps,omitempty"`
	KernelProbes int    `json:"kernel_probes,omitempty"`
	// UserProbes, with kernel timestamps, is every probe of Probes as the
	// processes timed it, in the same order: the same probes without the
	// kernels' timestamps (Round.UserTimed).
	UserProbes []Probe `json:"user_probes,omitempty"`
}

// Missing is a node that registered but did not take part in the whole round.
type Missing struct {
	Node string `json:"node"`
	Why  string `json:"why"`
}

// Round is one rounds file: every node pair measured in both directions.
type Round struct {
	Format    string      `json:"format"`
	Version   int         `json:"version"`
	Round     int         `json:"round"` // sequence number, from 1, per server run
	Label     string      `json:"label"` // "before", "after", "during", or the requester's
	Server    string      `json:"server"`
	StartedNs int64       `json:"started_realtime_ns"`
	EndedNs   int64       `json:"ended_realtime_ns"`
	PerDir    int         `json:"probes_per_direction"`
	Nodes     []Node      `json:"nodes"`
	Dirs      []Direction `json:"directions"`
	Missing   []Missing   `json:"missing,omitempty"`
	// Packets the server and clients dropped as unknown or malformed during
	// the round, by who dropped them.
	Malformed map[string]uint64 `json:"malformed,omitempty"`
}

// UserTimed is the round as the processes timed its probes: each
// direction's UserProbes in place of its Probes where it has them (kernel
// timestamps), the rest as it is. r is not changed.
func (r *Round) UserTimed() *Round {
	c := *r
	c.Dirs = append([]Direction(nil), r.Dirs...)
	for i := range c.Dirs {
		d := &c.Dirs[i]
		if d.UserProbes != nil {
			d.Probes, d.UserProbes, d.KernelProbes, d.Timestamps = d.UserProbes, nil, 0, "user"
		}
	}
	return &c
}

// FileName is the round's file name inside a rounds directory.
func (r *Round) FileName() string { return fmt.Sprintf("round-%06d.json", r.Round) }

// WriteRound writes r into dir atomically (temp file, fsync, rename).
func WriteRound(dir string, r *Round) (string, error) {
	r.Format, r.Version = RoundFormat, RoundVersion
	js, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.FileName())
	tmp, err := os.CreateTemp(dir, ".round-*")
	if err != nil {
		return "", err
	}
	_, err = tmp.Write(append(js, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return path, nil
}

// ReadRound reads and checks one rounds file.
func ReadRound(path string) (*Round, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Round
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Format != RoundFormat {
		return nil, fmt.Errorf("%s: not a rounds file (format %q)", path, r.Format)
	}
	if r.Version != RoundVersion {
		return nil, fmt.Errorf("%s: rounds file version %d, this build reads %d", path, r.Version, RoundVersion)
	}
	for _, d := range r.Dirs {
		for _, p := range d.Probes {
			if p.Recv < p.Send {
				return nil, fmt.Errorf("%s: %s->%s: probe received before it was sent", path, d.Origin, d.Responder)
			}
		}
	}
	return &r, nil
}

// ReadRounds reads every round-*.json in dir, ordered by start time (the
// files of several servers interleave by time, not by number).
func ReadRounds(dir string) ([]*Round, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var rs []*Round
	for _, e := range ents {
		if e.IsDir() || !strings.HasPrefix(e.Name(), "round-") || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		r, err := ReadRound(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return nil, errors.New(dir + ": no rounds files (round-*.json)")
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].StartedNs < rs[j].StartedNs })
	return rs, nil
}
