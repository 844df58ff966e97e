package installconfig

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A compact install: every compute pool asks for no machine (replicas: 0). The installer then
// makes the masters schedulable (mastersSchedulable in the Scheduler config): the masters run
// the workloads, and mount Manila shares, so they need the storage network that the workers of
// any other install get. Patch therefore takes the control plane too when no pool is named, and
// says why; when pools are named, it warns that they make no machine.

// compactPools are the compute pools of a compact install, in file order; nil when a compute
// pool makes machines or there is none (the installer's default is three workers then).
func compactPools(m *model) []*pool {
	if len(m.compute) == 0 {
		return nil
	}
	for _, p := range m.compute {
		if r, ok := replicas(p); !ok || r != 0 {
			return nil
		}
	}
	return m.compute
}

// replicas reads a compute pool's replicas; ok is false when it is absent (the installer's
// default, 3) or not a number.
func replicas(p *pool) (int64, bool) {
	v := replicasNode(p)
	if v == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v.Value), 10, 64)
	return n, err == nil
}

// replicasNode is the value of a compute pool's replicas, aliases followed; nil when absent.
func replicasNode(p *pool) *yaml.Node {
	if p.node == nil {
		return nil
	}
	es, _, _ := entries(resolve(p.node))
	found := lookup(es, "replicas")
	if len(found) == 0 {
		return nil
	}
	return resolve(chosen(found).value)
}

// compactNote is the Note of the control plane's changes when Patch took it for a compact install.
func compactNote(pools []*pool) string {
	return fmt.Sprintf("a compact install (%s): the masters run the workloads and mount the shares, so the control plane gets the IDs too", describeCompact(pools))
}

// compactWarnings warn that the pools named (of a compact install) make no machine.
func compactWarnings(pools []*pool, named []string) Problems {
	var out Problems
	for _, p := range pools {
		if !slices.Contains(named, p.name) {
			continue
		}
		line, col := 0, 0
		if n := replicasNode(p); n != nil {
			line, col = n.Line, n.Column
		}
		out = append(out, newProblem(SeverityWarning, RuleCompact, field.ErrorTypeInvalid, p.path.Child("replicas").String(), int64(0),
			fmt.Sprintf("a compact install: pool %q makes no machine, the masters run the workloads; add --control-plane so that they get the IDs", p.name), line, col))
	}
	return out
}

func describeCompact(pools []*pool) string {
	var names []string
	for _, p := range pools {
		names = append(names, fmt.Sprintf("%s %q has replicas 0", p.path, p.name))
	}
	return strings.Join(names, ", ")
}
