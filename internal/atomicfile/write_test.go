package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "install-config.yaml")
	if err := os.WriteFile(path, []byte("v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Through a symbolic link: the target is replaced, the link stays a link.
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("v2\n"), true); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("v3\n"), true); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{path: "v3\n", path + ".bak": "v2\n"} {
		got, err := os.ReadFile(p)
		if err != nil || string(got) != want {
			t.Errorf("%s = %q (%v), want %q", p, got, err, want)
		}
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", p, st.Mode().Perm())
		}
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("%d files in the directory, want the file, its backup and the link (no temporary file)", len(entries))
	}

	if err := WriteFile(dir, []byte("x"), false); err == nil {
		t.Error("writing over a directory succeeded")
	}
	if err := WriteFile(filepath.Join(dir, "missing", "ic.yaml"), []byte("x"), false); err == nil {
		t.Error("writing a file in a missing directory succeeded")
	}
}
