package main

import (
	"go/token"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		name, src, want string
	}{
		{"in order", "package p\nimport (\n\t\"fmt\"\n\n\t\"k8s.io/client-go/rest\"\n\n\t\"github.com/manila-setup/manila-setup/attach\"\n)\n", ""},
		{"ours before others", "package p\nimport (\n\t\"fmt\"\n\n\t\"github.com/manila-setup/manila-setup/attach\"\n\n\t\"k8s.io/client-go/rest\"\n)\n",
			`import "k8s.io/client-go/rest" (other modules) after "github.com/manila-setup/manila-setup/attach"`},
		{"others before the standard library", "package p\nimport (\n\t\"k8s.io/client-go/rest\"\n\n\t\"fmt\"\n)\n", `import "fmt" (the standard library)`},
		{"named imports and several declarations", "package p\nimport \"fmt\"\nimport (\n\tmetav1 \"k8s.io/apimachinery/pkg/apis/meta/v1\"\n\t_ \"embed\"\n)\n", `import "embed"`},
		{"only ours", "package p\nimport \"github.com/manila-setup/manila-setup/attach\"\n", ""},
		{"cgo stands apart", "package p\nimport \"k8s.io/klog/v2\"\nimport \"C\"\n", ""},
		{"no imports", "package p\n", ""},
	} {
		got, err := check(token.NewFileSet(), "x.go", tt.src)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
