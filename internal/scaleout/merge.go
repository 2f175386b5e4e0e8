package scaleout

import (
	"encoding/gob"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"cloudprofiler/internal/analyze"
)

// checkAllParts says which partitions the export wrote records into that
// no state holds, with those records: an analysis of the rest would count
// them nowhere.
func (a *exportAnalysis) checkAllParts(heldBy map[int]string) error {
	missing := map[int]uint64{}
	var total uint64
	for _, cp := range a.parts {
		for p, n := range cp {
			if _, ok := heldBy[p]; !ok {
				missing[p] += n
				total += n
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	ps := slices.Sorted(maps.Keys(missing))
	var names []string
	for i, p := range ps {
		if i == 8 {
			names = append(names, fmt.Sprintf("and %d more", len(ps)-8))
			break
		}
		names = append(names, fmt.Sprintf("%d (%d records)", p, missing[p]))
	}
	return fmt.Errorf("no state holds partition %s: the export wrote %d records there (channels/*.json); join-part every partition with records and give all their states", strings.Join(names, ", "), total)
}

// ErrOtherOrder: the votes of all the partitions give another channel order
// than the one they were joined with: join them again with
// MergeResult.Order.
var ErrOtherOrder = errors.New("the votes of all partitions give another channel order: join them again with it")

// MergeResult is what MergeParts found.
type MergeResult struct {
	*analyze.Result
	// Rank is the channel order the states' votes give, each channel's
	// place: what RunPart takes. Order is the tuple channels' labels in it,
	// first to last.
	Rank  []int
	Order []string
}

// MergeParts merges the states RunPart wrote for every partition of the
// export and, when they were joined with an order (not votes only) and
// cfg.Out is set, writes summary.csv, summary.parquet, summary.txt and
// model.json into it. With votes-only states it only gives the order.
// Where the states' votes give another order than they were joined with,
// it writes nothing and returns ErrOtherOrder with the order to join with.
//
// With stateOut, it writes the merged states as one state there instead
// (what merging them with the others later gives the same results: a
// merge done in a tree, on the executors) and only that.
//
// Every record counts once: two states that hold one partition are
// refused, and states joined with an order must hold every partition the
// export wrote records into (a merge into stateOut, and votes only, need
// not: the last merge, and a sample for the order).
func MergeParts(cfg analyze.Config, export string, states []string, stateOut string) (*MergeResult, error) {
	a, _, err := prepareExport(cfg, export)
	if err != nil {
		return nil, err
	}
	m := a.Merger()
	var joined []int
	var withCap bool
	heldBy := map[int]string{} // export partition -> the state holding it
	for i, path := range states {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		var st partState
		err = gob.NewDecoder(f).Decode(&st)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: no partition state of this version (%w)", path, err)
		}
		if st.Version != partStateVersion || st.State == nil {
			return nil, fmt.Errorf("%s: no partition state of this version (version %d; this cloudprofiler writes %d)", path, st.Version, partStateVersion)
		}
		if !slices.Equal(st.Channels, a.keys) {
			return nil, fmt.Errorf("%s: a state of another export (its channels %v; this export's %v)", path, st.Channels, a.keys)
		}
		for _, p := range st.Parts {
			if other, ok := heldBy[p]; ok {
				return nil, fmt.Errorf("%s and %s both hold partition %d: a state given twice, or two states of one partition (each partition's records count once)", other, path, p)
			}
			heldBy[p] = path
		}
		withCapHere := st.State.Capacity != nil
		if i == 0 {
			joined, withCap = st.Rank, withCapHere
		} else if !slices.Equal(st.Rank, joined) {
			return nil, fmt.Errorf("%s: joined with order %v, %s with %v: every partition takes one order", path, st.Rank, states[0], joined)
		} else if withCap != withCapHere {
			return nil, fmt.Errorf("%s and %s: one joined with capacity's sums, the other without (join-part --no-capacity): every partition is joined alike", path, states[0])
		}
		if err := m.Add(st.State); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	held := slices.Sorted(maps.Keys(heldBy))
	if stateOut != "" {
		// A merge in a tree: the partitions still missing are the last
		// merge's to name.
		return &MergeResult{Result: m.Result()}, writeGob(stateOut, &partState{Version: partStateVersion, Channels: a.keys, Rank: joined, Parts: held, State: m.State()})
	}
	rank, err := m.Rank()
	if err != nil {
		return nil, err
	}
	res := &MergeResult{Result: m.Result(), Rank: rank}
	chans := a.Channels()
	byRank := make([]int, len(chans))
	for i, r := range rank {
		byRank[r] = i
	}
	for _, i := range byRank {
		if chans[i].Role == analyze.RoleTuples {
			res.Order = append(res.Order, chans[i].Label())
		}
	}
	if joined == nil {
		return res, nil // votes only: a sample of the partitions gives the order
	}
	if err := a.checkAllParts(heldBy); err != nil {
		return nil, err
	}
	if !slices.Equal(rank, joined) {
		return res, ErrOtherOrder
	}
	if err := m.Finish(rank, cfg.Out); err != nil {
		return nil, err
	}
	return res, nil
}
