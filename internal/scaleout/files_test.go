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

// A state file is whole or absent: written, it reads back and leaves no
// partial file; a state that cannot be encoded leaves neither the file nor
// its partial one, and an earlier state at the path stays as it was.
func TestWriteGobWholeOrNone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	want := &partState{Version: partStateVersion, Channels: []string{"a/x.cplog"}, Parts: []int{3},
		State: &analyze.State{Records: 7, Tuples: 2}}
	require.NoError(t, writeGob(path, want))
	f, err := os.Open(path)
	require.NoError(t, err)
	var got partState
	require.NoError(t, gob.NewDecoder(f).Decode(&got))
	f.Close()
	require.Equal(t, want, &got)
	_, err = os.Stat(path + ".partial")
	require.True(t, errors.Is(err, os.ErrNotExist), "the partial file is gone")

	require.Error(t, writeGob(path, map[string]any{"x": make(chan int)}), "a channel cannot be encoded")
	_, err = os.Stat(path + ".partial")
	require.True(t, errors.Is(err, os.ErrNotExist), "the partial file is gone after a failure")
	f, err = os.Open(path)
	require.NoError(t, err)
	got = partState{}
	require.NoError(t, gob.NewDecoder(f).Decode(&got), "the earlier state is untouched")
	f.Close()
	require.Equal(t, want, &got)
}
