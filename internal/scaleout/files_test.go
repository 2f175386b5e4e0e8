package scaleout

import (
	"encoding/gob"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/analyze"
)

// readState reads the state file at path.
func readState(t *testing.T, path string) partState {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var st partState
	require.NoError(t, gob.NewDecoder(f).Decode(&st))
	return st
}

// A state file is whole or absent: written, it reads back and leaves no
// partial file; a state that cannot be encoded leaves neither the file nor
// its partial one, and an earlier state at the path stays as it was.
func TestWriteGobWholeOrNone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	want := &partState{Version: partStateVersion, Channels: []string{"a/x.cplog"}, Parts: []int{3},
		State: &analyze.State{Records: 7, Tuples: 2}}
	require.NoError(t, writeGob(path, want))
	got := readState(t, path)
	require.Equal(t, want, &got)
	_, err := os.Stat(path + ".partial")
	require.True(t, errors.Is(err, os.ErrNotExist), "the partial file is gone")

	require.Error(t, writeGob(path, map[string]any{"x": make(chan int)}), "a channel cannot be encoded")
	_, err = os.Stat(path + ".partial")
	require.True(t, errors.Is(err, os.ErrNotExist), "the partial file is gone after a failure")
	got = readState(t, path)
	require.Equal(t, want, &got, "the earlier state is untouched")
}

// merge-parts refuses a state of another version (an older cloudprofiler's,
// whose layout gob reads as no State) and one of another export's channels,
// naming the file.
func TestMergeRefusesForeignStates(t *testing.T) {
	dir := t.TempDir()
	writeTopology(t, dir, 300, 4)
	cfg := analyze.Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")}, Ref: "b"}
	ex := filepath.Join(dir, "export")
	files := exportParts(t, cfg, ex, 2)
	good := filepath.Join(dir, "good")
	require.NoError(t, RunPart(PartConfig{Export: ex, Records: files[:1], State: good, Partition: 0, NoCapacity: true}))
	st := readState(t, good)

	// Version 4 kept the counts beside the channels, no State.
	type v4 struct {
		Version         int
		Channels        []string
		Records, Tuples uint64
	}
	old := filepath.Join(dir, "old")
	require.NoError(t, writeGob(old, &v4{Version: 4, Channels: st.Channels, Records: 10, Tuples: 2}))
	_, err := MergeParts(analyze.Config{NoCapacity: true}, ex, []string{good, old}, "")
	require.ErrorContains(t, err, old+": no partition state of this version (version 4; this cloudprofiler writes 5)")

	other := filepath.Join(dir, "other")
	st.Channels = append([]string{"x/elsewhere.cplog"}, st.Channels[1:]...)
	require.NoError(t, writeGob(other, &st))
	_, err = MergeParts(analyze.Config{NoCapacity: true}, ex, []string{other}, "")
	require.ErrorContains(t, err, other+": a state of another export")
}
