package analyze

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"cloudprofiler/internal/logfile"
)

// Role is what the analysis does with a channel file.
type Role int

const (
	RoleTuples  Role = iota // (tuple id, TSC) records joined across channels
	RoleFirst               // FIRSTLAST: first and last tuple, for the run duration
	RoleCounter             // periodic counters: throughput over time
	RoleReturn              // FOX_START return log: ReTACK arrival times
	RoleLineage             // LINEAGE: (output id, input id) pairs, read before the join (lineage.go)
)

// Channel is one channel log file and where its counter comes from.
type Channel struct {
	Path    string
	Node    string // header "node" (CP_NODE), else the host name
	Name    string
	PID     int
	Handler string
	Role    Role
	Hz      float64 // the node's TSC frequency as the file header says
	Header  logfile.Header
	node    int // the node's index in the model
	// maxRecords is the most records the file can hold (logfile.File.MaxRecords).
	maxRecords uint64
	// Problems: what reading the file found damaged or knows to be lost
	// (logfile.Summary.Problems), empty for a complete, undamaged file.
	Problems []string
	// pidInLabel: another process's channel has this node/name (Label).
	pidInLabel bool
}

// ReadDone takes the outcome of a full read of c's file: damage and loss
// are kept in c.Problems (the analysis goes on with every valid record),
// anything else fails the analysis.
func (c *Channel) ReadDone(lf *logfile.File, err error) error {
	if errors.Is(err, logfile.ErrDamaged) {
		c.Problems = append(cutProblems(&lf.Header), lf.Summary.Problems(&lf.Header)...)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c.Path, err)
	}
	return nil
}

// Label is how reports name the channel: node/name, or node/pid/name when
// a channel of another process on the node has that name too (two
// processes marking one OPERATOR#INSTANCE, say): one label would name two
// channels' rows.
func (c *Channel) Label() string {
	if c.pidInLabel {
		return c.Node + "/" + strconv.Itoa(c.PID) + "/" + c.Name
	}
	return c.nodeName()
}

// nodeName is node/name: the channel whichever process logged it.
func (c *Channel) nodeName() string { return c.Node + "/" + c.Name }

// labelProcesses puts the process into the labels of the channels whose
// node/name a channel of another process shares (Label).
func labelProcesses(chans []*Channel) {
	pids := map[string]map[int]bool{}
	for _, c := range chans {
		k := c.nodeName()
		if pids[k] == nil {
			pids[k] = map[int]bool{}
		}
		pids[k][c.PID] = true
	}
	for _, c := range chans {
		c.pidInLabel = len(pids[c.nodeName()]) > 1
	}
}

// findChannels walks each directory (or takes each file) for channel logs.
// What a walk finds under a log's name that is no regular file (a FIFO, a
// socket) is skipped, and said in skipped; a path named itself must be one.
func findChannels(paths []string) (chans []*Channel, skipped []string, err error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, nil, fmt.Errorf("logs: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".cplog") || strings.HasSuffix(path, ".cplog.txt")) {
				if !d.Type().IsRegular() {
					skipped = append(skipped, fmt.Sprintf("%s: skipped: %v (a %s)", path, logfile.ErrNotRegular, logfile.FileKind(d.Type())))
					return nil
				}
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("logs: %w", err)
		}
	}
	sort.Strings(files)
	// The same file named twice (a directory and a file in it) counts once.
	seen := map[string]bool{}
	uniq := files[:0]
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			abs = f
		}
		if !seen[abs] {
			seen[abs] = true
			uniq = append(uniq, f)
		}
	}
	files = uniq
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("logs: no channel files (*.cplog, *.cplog.txt) under %s", strings.Join(paths, ", "))
	}
	// A copy of a log (a directory given twice under two names, a cut
	// beside its source) would count its records twice: the same channel
	// is one file.
	byID := map[string]string{}
	for _, path := range files {
		lf, err := logfile.Open(path)
		if err != nil {
			return nil, nil, err
		}
		h := lf.Header
		maxRecords := lf.MaxRecords
		lf.Close()
		c := channelOf(path, h, maxRecords)
		id := channelIdentity(c)
		if other, ok := byID[id]; ok {
			return nil, nil, fmt.Errorf("logs: %s and %s are the same channel's log (node %s, pid %d, channel %d %q, opened at TSC %d): a log directory given twice, or a copy of a log, or a cut beside its source; give each channel's log once",
				other, path, c.Node, h.PID, h.Channel, h.Name, h.OpenSync.TSC)
		}
		byID[id] = path
		chans = append(chans, c)
	}
	labelProcesses(chans)
	return chans, skipped, nil
}

// channelIdentity names the channel a log is of, whatever its file: the
// node and its counter, the process, the channel's number and name, the
// counter reading at its open, and which of a FOX_START channel's two logs.
func channelIdentity(c *Channel) string {
	fox := ""
	if c.Header.Fox != nil {
		fox = c.Header.Fox.Role
	}
	return fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00%s\x00%d\x00%s", c.Node, c.Header.TSCDomain, c.PID, c.Header.Channel, c.Name, c.Header.OpenSync.TSC, fox)
}

// channelOf is the channel of the file at path, from its header.
func channelOf(path string, h logfile.Header, maxRecords uint64) *Channel {
	c := &Channel{Path: path, Node: h.Node, Name: h.Name, PID: h.PID, Handler: h.Handler, Hz: h.TSCHz, Header: h, maxRecords: maxRecords,
		Problems: cutProblems(&h)}
	if c.Node == "" {
		c.Node = h.Host
	}
	switch {
	case h.Counter():
		c.Role = RoleCounter
	case h.Handler == "FIRSTLAST":
		c.Role = RoleFirst
	case isReturnLog(&h):
		c.Role = RoleReturn
	case h.Handler == logfile.LineageHandler:
		c.Role = RoleLineage
	}
	return c
}

// isReturnLog says whether a FOX_START file is the return log (ReTACKs).
func isReturnLog(h *logfile.Header) bool { return h.Fox != nil && h.Fox.Role == "return" }

// cutProblems are the damage and losses of the file a cut was made from
// (export --format logs): the cut itself is whole, its source was not.
func cutProblems(h *logfile.Header) []string {
	if h.Cut == nil {
		return nil
	}
	out := make([]string, len(h.Cut.Problems))
	for i, p := range h.Cut.Problems {
		out[i] = "before the cut, in " + h.Cut.Source + ": " + p
	}
	return out
}
