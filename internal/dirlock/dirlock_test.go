package dirlock

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A second writer waits, says so, and goes on once the first lets go.
func TestSecondWriterWaits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	unlock, err := Lock(dir, "export", &bytes.Buffer{})
	require.NoError(t, err)
	msg := make(said, 1)
	got := make(chan time.Time, 1)
	go func() {
		u, err := Lock(dir, "export", msg)
		require.NoError(t, err)
		got <- time.Now()
		u()
	}()
	require.Equal(t, "export: another export or cut is writing "+dir+": waiting for it to finish\n", <-msg)
	select {
	case <-got:
		t.Fatal("the second writer took the lock while the first held it")
	default:
	}
	released := time.Now()
	unlock()
	require.False(t, (<-got).Before(released))
}

// said is a writer whose writes arrive on a channel (the waiting writer's
// message, read by the test).
type said chan string

func (s said) Write(p []byte) (int, error) {
	s <- string(p)
	return len(p), nil
}

// A writer that created the directory and wrote nothing leaves no
// directory; a waiter then locks the directory at the path, not the one
// removed.
func TestEmptyCreatedDirGoes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	unlock, err := Lock(dir, "export", &bytes.Buffer{})
	require.NoError(t, err)
	done := make(chan func(), 1)
	go func() {
		u, err := Lock(dir, "export", &bytes.Buffer{})
		require.NoError(t, err)
		done <- u
	}()
	time.Sleep(20 * time.Millisecond) // usually waiting by now; either way the same outcome
	unlock()
	u := <-done
	_, err = os.Stat(dir)
	require.NoError(t, err, "the waiter made the directory again and holds its lock")
	u()
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "empty and created by the writer: removed")
	// A directory that existed stays.
	require.NoError(t, os.MkdirAll(dir, 0o755))
	u, err = Lock(dir, "export", &bytes.Buffer{})
	require.NoError(t, err)
	u()
	_, err = os.Stat(dir)
	require.NoError(t, err)
}
