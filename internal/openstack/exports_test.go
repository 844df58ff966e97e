package openstack

import (
	"os"
	"slices"
	"testing"
)

func TestExportHosts(t *testing.T) {
	tests := []struct {
		path  string
		addrs []string
		names []string
	}{
		{"10.0.0.10:/share_abc", []string{"10.0.0.10"}, nil},
		{"10.0.0.10:/", []string{"10.0.0.10"}, nil},
		{"[fd00:5::10]:/share_abc", []string{"fd00:5::10"}, nil},
		{"fd00:5::10:/share_abc", []string{"fd00:5::10"}, nil},
		{"10.0.0.1:6789,10.0.0.2:6789,10.0.0.3:6789:/volumes/_nogroup/x", []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, nil},
		{"[fd00::1]:6789,[fd00::2]:3300:/volumes/x", []string{"fd00::1", "fd00::2"}, nil},
		{`\\10.0.0.10\share_abc`, []string{"10.0.0.10"}, nil},
		{"//10.0.0.11/share", []string{"10.0.0.11"}, nil},
		{"nfs.example.com:/share", nil, []string{"nfs.example.com"}},
		{"NFS.Example.com:2049:/share", nil, []string{"nfs.example.com"}},
		{"hdfs://10.0.0.5:8020/path", []string{"10.0.0.5"}, nil},
		{"::ffff:10.0.0.7:/share", []string{"10.0.0.7"}, nil},
		{"", nil, nil},
		{"  10.0.0.10:/x  ", []string{"10.0.0.10"}, nil},
	}
	for _, tt := range tests {
		addrs, names := ExportHosts(tt.path)
		var got []string
		for _, a := range addrs {
			got = append(got, a.String())
		}
		if !slices.Equal(got, tt.addrs) || !slices.Equal(names, tt.names) {
			t.Errorf("ExportHosts(%q) = %v, %v; want %v, %v", tt.path, got, names, tt.addrs, tt.names)
		}
	}
}

func FuzzExportHosts(f *testing.F) {
	for _, s := range []string{"10.0.0.10:/s", "[fd00::1]:/s", `\\h\s`, "a:1,b:2:/v", "hdfs://x:1/p"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		addrs, _ := ExportHosts(path)
		for _, a := range addrs {
			if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
				t.Fatalf("ExportHosts(%q) returned %v", path, a)
			}
		}
	})
}

func writeFileForTest(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
