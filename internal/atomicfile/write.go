package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces the file at path with data so that, whatever happens, the path holds
// either the old or the new content in full: it writes a temporary file in the same directory,
// fsyncs it, gives it the old file's mode (and owner, where allowed) and renames it over the
// old one, then fsyncs the directory. When backup is set, the old content is first kept, the
// same way, in path + ".bak". A symbolic link is followed: its target is replaced.
func WriteFile(path string, data []byte, backup bool) error {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	info, err := os.Stat(target)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if backup {
		old, err := os.ReadFile(target)
		if err != nil {
			return err
		}
		if err := replaceFile(target+".bak", old, info); err != nil {
			return fmt.Errorf("keeping a backup: %w", err)
		}
	}
	return replaceFile(target, data, info)
}

// WriteNew writes data to path, which may not exist yet, the same way: a temporary file in the
// same directory, fsynced and renamed into place, so that the path never holds part of it.
func WriteNew(path string, data []byte, perm fs.FileMode) error {
	return writeVia(path, data, perm, nil)
}

func replaceFile(path string, data []byte, like fs.FileInfo) error {
	return writeVia(path, data, like.Mode().Perm(), like)
}

// writeVia writes path through a temporary file with mode perm (and like's owner, when given).
func writeVia(path string, data []byte, perm fs.FileMode, like fs.FileInfo) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if like != nil {
		chownLike(tmp, like)
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync() // best effort: some file systems do not sync directories
		d.Close()
	}
	return nil
}
