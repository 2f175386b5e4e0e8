package analyze

import (
	"fmt"
	"strconv"
	"strings"

	"cloudprofiler/internal/logfile"
)

// Lineage (CP_LINEAGE channels, role "lineage" of the naming rule): an
// operator whose outputs have ids of their own (a window, a join, an
// aggregate) logs, for each output, every input it was made from, in the
// order they arrived (CP_LogLineage: records of id out_id whose TSC column
// holds in_id, logfile.LineageInput). The analysis follows the LAST input
// logged for an output (the one the output waited for): before the tuple
// channels are decoded, every lineage channel is read into an alias map
// out_id -> in_id, and decodeFile gives each tuple record of an output the
// id of that input. One tuple's way then runs source -> ... -> OP in (the
// input) -> OP out (the output) -> ... -> sink; the other inputs end at
// OP in.
//
// Per out_id the last record read wins: records in file order (the order
// they were logged on that channel), the lineage files in the order the
// analysis lists its channels (by path). An output logged on two lineage
// channels (two instances claiming one output id) keeps the later file's
// last input. Chains are resolved transitively (an output that is itself
// the input of another operator's output maps to the first input of the
// chain, its root); a cycle (an output made, through the chain, from
// itself) is an error naming its ids.
//
// Memory: the map holds one entry per output id, at most lineageEntryBytes
// each; it must fit in an eighth of Config.MemBytes (what the pipeline
// leaves beside its partitions, decoders and spill index), else the
// analysis fails saying the --mem-mb that would do. It lives through the
// decoding only (decodeAll's): the join's stages never hold it.

// lineageEntryBytes bounds what one output id takes in the alias map (a Go
// map of int64 to int64, measured at 26 to 42 bytes an entry live).
const lineageEntryBytes = 48

// lineageMap is the alias map: output id -> the root input it is joined to.
type lineageMap map[int64]int64

// readLineage reads every lineage channel into the alias map (nil without
// one) and resolves its chains; it records what it read in a.res.
func (a *analysis) readLineage() (lineageMap, error) {
	var files []*Channel
	for _, c := range a.chans {
		if c.Role == RoleLineage {
			files = append(files, c)
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	budget := a.cfg.MemBytes / 8
	maxEntries := int(budget / lineageEntryBytes)
	m := lineageMap{}
	var pairs uint64
	for _, c := range files {
		lf, err := logfile.Open(c.Path)
		if err != nil {
			return nil, err
		}
		err = lf.RecordBatches(func(rs []logfile.Record) error {
			for _, r := range rs {
				if _, ok := m[r.TupleID]; !ok && len(m) >= maxEntries {
					return lineageTooBig(c, len(m)+1, a.cfg.MemBytes)
				}
				m[r.TupleID] = logfile.LineageInput(r.TSC)
			}
			pairs += uint64(len(rs))
			return nil
		})
		lf.Close()
		if err := c.ReadDone(lf, err); err != nil {
			return nil, err
		}
	}
	if err := m.resolve(); err != nil {
		return nil, err
	}
	a.res.LineageChannels, a.res.LineagePairs, a.res.LineageOutputs = len(files), pairs, uint64(len(m))
	return m, nil
}

// lineageTooBig is the error of a map past its budget: the figure, and the
// --mem-mb that would hold at least this many output ids.
func lineageTooBig(c *Channel, entries int, mem int64) error {
	need := int64(entries) * lineageEntryBytes
	return fmt.Errorf("analyze: lineage: %s holds more than %d distinct output ids (%d bytes each in the alias map: over %d MiB), "+
		"more than an eighth of --mem-mb %d; give --mem-mb %d or more",
		c.Path, entries-1, lineageEntryBytes, need>>20, mem>>20, (need*8+1<<20-1)>>20)
}

// resolve maps every output id to the root of its chain (an input that is
// no output), compressing paths as it goes: each key's value ends as a
// root, so every record needs one lookup. A chain longer than the map
// holds ids is a cycle.
func (m lineageMap) resolve() error {
	var path []int64
	for out, in := range m {
		if _, ok := m[in]; !ok {
			continue // already a root
		}
		path = append(path[:0], out)
		cur := in
		for {
			next, ok := m[cur]
			if !ok {
				break
			}
			if len(path) > len(m) {
				return lineageCycle(m, cur)
			}
			path = append(path, cur)
			cur = next
		}
		for _, p := range path {
			m[p] = cur
		}
	}
	return nil
}

// lineageCycle names the ids of the cycle that start leads into.
func lineageCycle(m lineageMap, start int64) error {
	ids := []string{strconv.FormatInt(start, 10)}
	cur := m[start]
	for ; cur != start && len(ids) < 10; cur = m[cur] {
		ids = append(ids, strconv.FormatInt(cur, 10))
	}
	if cur == start {
		ids = append(ids, strconv.FormatInt(start, 10))
	} else {
		ids = append(ids, "...")
	}
	return fmt.Errorf("analyze: lineage: a cycle of output ids, each made (as its last input) from the next: %s; "+
		"an output id must differ from every input id (CP_LogLineage)", strings.Join(ids, " <- "))
}
