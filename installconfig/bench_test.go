package installconfig

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// fakeID is a deterministic UUID v4.
func fakeID(kind, pool, i int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-%c%03x-%012x", 0x5e000000+kind, pool, i, "89ab"[i%4], pool%4096, kind*1000000+pool*100+i)
}

// largeConfig is an install-config with the given number of compute pools, each with 16
// networks and 16 security groups with a comment each: about 2.2 KB per pool, so 500 pools
// make the 1 MiB file of the benchmarks and of the corpus.
func largeConfig(pools int) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nbaseDomain: example.com\nmetadata:\n  name: large\ncompute:\n")
	for p := 0; p < pools; p++ {
		fmt.Fprintf(&b, "# Pool %d of %d.\n- name: worker-%03d\n  replicas: 3\n  platform:\n    openstack:\n      type: m1.xlarge\n      zones: [az%d]\n", p+1, pools, p, p%3)
		b.WriteString("      additionalNetworkIDs:\n")
		for i := 0; i < 16; i++ {
			fmt.Fprintf(&b, "      - %s  # storage net %02d\n", fakeID(1, p, i), i)
		}
		b.WriteString("      additionalSecurityGroupIDs:\n")
		for i := 0; i < 16; i++ {
			fmt.Fprintf(&b, "      - %s  # storage sg  %02d\n", fakeID(2, p, i), i)
		}
	}
	b.WriteString("controlPlane:\n  name: master\n  replicas: 3\nplatform:\n  openstack:\n    cloud: mycloud\n    externalNetwork: external\n")
	b.WriteString("pullSecret: '{\"auths\":{}}'\n")
	return b.Bytes()
}

func TestLargeCorpusFileIsGenerated(t *testing.T) {
	path := filepath.Join("testdata", "corpus", "valid-large-500-pools.yaml")
	want := largeConfig(500)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := readFile(t, path)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not largeConfig(500); run go test ./installconfig -update", path)
	}
	if len(got) < 1<<20 {
		t.Errorf("%s is %d bytes, want at least 1 MiB", path, len(got))
	}
}

func benchmarkValidate(b *testing.B, data []byte) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ps := Check("install-config.yaml", data); ps.Errors() != 0 {
			b.Fatal(ps.Text("install-config.yaml"))
		}
	}
}

// BenchmarkValidateTypical: load and validate the typical install-config of the corpus.
func BenchmarkValidateTypical(b *testing.B) {
	benchmarkValidate(b, readFile(b, "testdata/corpus/valid-typical.yaml"))
}

// BenchmarkValidateLarge: a 1 MiB file with 500 compute pools.
func BenchmarkValidateLarge(b *testing.B) {
	benchmarkValidate(b, largeConfig(500))
}

// BenchmarkValidateScaling shows that the time grows linearly with the file size.
func BenchmarkValidateScaling(b *testing.B) {
	for _, pools := range []int{50, 100, 200, 400, 800} {
		b.Run(fmt.Sprintf("pools=%d", pools), func(b *testing.B) {
			benchmarkValidate(b, largeConfig(pools))
		})
	}
}

func benchmarkPatch(b *testing.B, data []byte) {
	opts := PatchOptions{Networks: []string{addNetwork}, SecurityGroups: []string{addSG}}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		f, _ := Parse("install-config.yaml", data)
		res, err := Patch(f, opts)
		if err != nil || !res.Changed || res.Reformatted {
			b.Fatalf("patch: %v", err)
		}
	}
}

// BenchmarkPatchTypical: validate, patch, verify the typical install-config.
func BenchmarkPatchTypical(b *testing.B) {
	benchmarkPatch(b, readFile(b, "testdata/corpus/valid-typical.yaml"))
}

// BenchmarkPatchLarge: the same on the 1 MiB file (500 pools, 1000 lists changed).
func BenchmarkPatchLarge(b *testing.B) {
	benchmarkPatch(b, largeConfig(500))
}

func BenchmarkUnifiedDiffTypical(b *testing.B) {
	data := readFile(b, "testdata/corpus/valid-typical.yaml")
	f, _ := Parse("install-config.yaml", data)
	res, err := Patch(f, PatchOptions{Networks: []string{addNetwork}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		UnifiedDiff("a", "b", data, res.Output)
	}
}

// BenchmarkUnifiedDiffLarge: the diff of the 1 MiB file's patch (500 pools, 1000 lists changed).
func BenchmarkUnifiedDiffLarge(b *testing.B) {
	data := largeConfig(500)
	f, _ := Parse("install-config.yaml", data)
	res, err := Patch(f, PatchOptions{Networks: []string{addNetwork}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		UnifiedDiff("a", "b", data, res.Output)
	}
}
