package scaleout

import (
	"bufio"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"cloudprofiler/internal/analyze"
	"cloudprofiler/internal/dirlock"
)

// The scale-out path's files: each written whole or not at all (through a
// partial file and a rename), its output directory locked while written.

// prepareOut takes the lock of an export's or cut's directory, cfg.Out
// (creating it): another writer into it waits, saying so (dirlock), so
// that each one's checks see the other's files. Then it reads the logs'
// channels and the rounds.
func prepareOut(cfg analyze.Config) (*analyze.Prepared, func(), error) {
	if cfg.Out == "" {
		return nil, nil, errors.New("export: --logs and --out are required (and --rounds when the logs come from several nodes)")
	}
	wait := cfg.Progress
	if wait == nil {
		wait = os.Stderr
	}
	unlock, err := dirlock.Lock(cfg.Out, "export", wait)
	if err != nil {
		return nil, nil, fmt.Errorf("export: %w", err)
	}
	pr, err := analyze.Prepare(cfg)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return pr, unlock, nil
}

// copyFileAtomic copies src to dst through dst.partial and a rename.
func copyFileAtomic(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := createAtomic(dst, func(w io.Writer) error { _, err := io.Copy(w, in); return err }); err != nil {
		return fmt.Errorf("export: %s: %w", dst, err)
	}
	return nil
}

// createAtomic creates path with what fill writes, through path.partial
// and a rename: a reader finds the whole file or none (a failure removes
// the partial file).
func createAtomic(path string, fill func(io.Writer) error) error {
	tmp := path + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	err = fill(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// writeFileAtomic writes path through path.partial and a rename.
func writeFileAtomic(path string, b []byte) error {
	if err := createAtomic(path, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// writeGob writes v's gob to path through a file beside it, renamed into
// place once whole: straight to the file (a state is tens of MB while its
// pairs keep exact values; a buffer of it all, grown by doubling, cost
// copies and page faults).
func writeGob(path string, v any) error {
	return createAtomic(path, func(f io.Writer) error {
		bw := bufio.NewWriterSize(f, 1<<20)
		if err := gob.NewEncoder(bw).Encode(v); err != nil {
			return err
		}
		return bw.Flush()
	})
}

// eachOnWorkers calls fn(0..n-1) on workers goroutines, which take the
// next i in turn; it stops at the first error and returns them all.
func eachOnWorkers(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var failed atomic.Bool
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for wk := range errs {
		wg.Add(1)
		go func(wk int) {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if errs[wk] = fn(i); errs[wk] != nil {
					failed.Store(true)
					return
				}
			}
		}(wk)
	}
	wg.Wait()
	return errors.Join(errs...)
}
