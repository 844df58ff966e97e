package nodepools

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/attach"
)

// TestPickByName: Names selects NodePools by NAMESPACE/NAME, keeps the listing's order, and
// names one that is not there, with those that are, before anything is written.
func TestPickByName(t *testing.T) {
	pool := func(ns, name string) unstructured.Unstructured {
		u := unstructured.Unstructured{}
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	pools := []unstructured.Unstructured{pool("clusters", "hc1-workers"), pool("clusters", "hc2-workers"), pool("team-b", "hc1-workers")}
	for _, c := range []struct {
		name      string
		names     []string
		cluster   string
		want      []string
		wantError string
	}{
		{name: "no names: all", want: []string{"clusters/hc1-workers", "clusters/hc2-workers", "team-b/hc1-workers"}},
		{name: "the same name in two namespaces", names: []string{"team-b/hc1-workers"}, want: []string{"team-b/hc1-workers"}},
		{name: "listing order, duplicates once", names: []string{"team-b/hc1-workers", "clusters/hc1-workers", "team-b/hc1-workers"}, want: []string{"clusters/hc1-workers", "team-b/hc1-workers"}},
		{name: "missing", names: []string{"clusters/hc1-workers", "clusters/nope"}, cluster: "hc1",
			wantError: `NodePool clusters/nope not found among the NodePools of HostedCluster "hc1" (there: clusters/hc1-workers, clusters/hc2-workers, team-b/hc1-workers)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := pick(pools, c.names, "", c.cluster)
			if c.wantError != "" {
				var sel *attach.SelectionError
				if !errors.As(err, &sel) || err.Error() != c.wantError {
					t.Fatalf("error %v, want SelectionError %q", err, c.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, u := range got {
				names = append(names, u.GetNamespace()+"/"+u.GetName())
			}
			if !slices.Equal(names, c.want) {
				t.Errorf("picked %v, want %v", names, c.want)
			}
		})
	}
}

// TestNamesMustBeNamespaced: a NodePool name without its namespace is refused, with the form
// expected, before the cluster is read.
func TestNamesMustBeNamespaced(t *testing.T) {
	for _, n := range []string{"hc1-workers", "/hc1-workers", "clusters/", "a/b/c"} {
		scope := Scope{Names: []string{n}}
		err := scope.check()
		var sel *attach.SelectionError
		if !errors.As(err, &sel) || !strings.Contains(err.Error(), "must be NAMESPACE/NAME") || !strings.Contains(err.Error(), n) {
			t.Errorf("%q: %v", n, err)
		}
	}
	ok := Scope{Names: []string{"clusters/hc1-workers"}}
	if err := ok.check(); err != nil {
		t.Errorf("clusters/hc1-workers: %v", err)
	}
}
