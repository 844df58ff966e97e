//go:build unix

package atomicfile

import (
	"io/fs"
	"os"
	"syscall"
)

// chownLike gives f the owner and group of like, when the process may (as root); otherwise the
// new file keeps the caller's, as any editor would.
func chownLike(f *os.File, like fs.FileInfo) {
	if st, ok := like.Sys().(*syscall.Stat_t); ok {
		_ = f.Chown(int(st.Uid), int(st.Gid))
	}
}
