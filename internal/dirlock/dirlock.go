// Package dirlock serialises the writers of one output directory (an
// export's, a cut's): two of them at once would each pass the checks made
// for the other's files and both write, leaving records twice or files of
// two ranges side by side. The lock is flock(2) on the directory itself, so
// it needs no file in it and goes with the process that holds it.
package dirlock

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Lock creates dir if need be and takes its lock; when another writer
// holds it, it says so on wait (naming what) and waits for it. The
// returned func lets the lock go, and removes dir if Lock created it and
// it is still empty (a writer that refused its work leaves nothing).
func Lock(dir, what string, wait io.Writer) (func(), error) {
	said := false
	for {
		_, err := os.Stat(dir)
		created := os.IsNotExist(err)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		f, err := os.Open(dir)
		if err != nil {
			return nil, err
		}
		if err := lock(f, dir, what, wait, &said); err != nil {
			f.Close()
			return nil, err
		}
		// The writer before may have removed the directory it created
		// (and someone made another): the lock must be the path's.
		held, err1 := f.Stat()
		now, err2 := os.Stat(dir)
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			return func() {
				if created {
					os.Remove(dir) // only if empty
				}
				f.Close() // the last descriptor: the lock goes
			}, nil
		}
		f.Close()
	}
}

func lock(f *os.File, dir, what string, wait io.Writer, said *bool) error {
	fd := int(f.Fd())
	err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	if err != unix.EWOULDBLOCK {
		if err != nil {
			return fmt.Errorf("lock %s: %w", dir, err)
		}
		return nil
	}
	if !*said {
		fmt.Fprintf(wait, "%s: another export or cut is writing %s: waiting for it to finish\n", what, dir)
		*said = true
	}
	for {
		if err = unix.Flock(fd, unix.LOCK_EX); err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	return nil
}
