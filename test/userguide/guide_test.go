package userguide

import (
	"strings"
	"testing"
)

func TestSamplesOf(t *testing.T) {
	guide := strings.Split(strings.Join([]string{
		"intro",
		"<!-- sample: first -->",
		"```",
		"$ manila-setup version",
		"```",
		"",
		"```yaml",
		"kind: PersistentVolumeClaim",
		"```",
		"1. a list",
		"",
		"   <!-- sample: nested -->",
		"   ```",
		"   line one",
		"",
		"   line two",
		"   ```",
		"<!-- not a sample: from a real cluster -->",
		"```",
		"Warning FailedMount",
		"```",
	}, "\n"), "\n")
	samples, err := samplesOf(guide)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 2 || samples[0].name != "first" || samples[1].name != "nested" || samples[1].indent != "   " {
		t.Fatalf("samples %+v", samples)
	}
	if got := samples[1].text(guide); got != "line one\n\nline two" {
		t.Errorf("nested text %q", got)
	}
	out := replaced(guide, samples, map[string]string{"nested": "new one\n\nnew two\n"})
	if got := strings.Join(out[11:17], "\n"); got != "   <!-- sample: nested -->\n   ```\n   new one\n\n   new two\n   ```" {
		t.Errorf("replaced:\n%s", got)
	}
	if len(out) != len(guide) || out[0] != "intro" || out[len(out)-1] != "```" {
		t.Errorf("replaced changed the rest: %q", out)
	}

	for _, bad := range [][]string{
		{"text", "```", "output", "```"},                           // no marker
		{"<!-- sample: x -->", "", "text", "```", "output", "```"}, // the marker is not the line before
		{"<!-- sample: x -->", "```", "never closed"},
	} {
		if _, err := samplesOf(bad); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

func TestNormalized(t *testing.T) {
	a := "[  26s] operator running (health on http://127.0.0.1:37769) in 2.6s, pid 23024\n" +
		"ostest-demo1-worker-0-9597h not attached\n" +
		"ostest-demo1-worker-0-7scpd  network d65e53a1-a189-436d-9fac-887318eaf064, 3 shares are exported, 5 available shares, score 305, age 2m1s\n" +
		"generation 1 (observed 1), version 52fde88-dirty\n" +
		"rpc error: code = DeadlineExceeded desc = context deadline exceeded\n" +
		"Secret csi-manila-secrets, StorageClasses csi-manila-cephfs-fast, csi-manila-default, in 2.6s\n" +
		"kube binaries cached in /root/.cache/manila-setup/kube/k8s-1.34.10_etcd-3.6.5_kwok-0.8.0\n" +
		"kubelet cached in /root/.cache/manila-setup/node/k8s-1.34.10\n" +
		"rule r (ip 10.0.0.0/24, rw, active) admits 10.0.0.215 (its address), manila-csi-driver-nfs-node-25vls Ready, port p with 10.0.0.215\n\n"
	b := "[   9s] operator running (health on http://127.0.0.1:40001) in 310ms, pid 7\n" +
		"ostest-demo1-worker-0-xphp4 not attached\n" +
		"ostest-demo1-worker-0-q2x8k network 0b3c46a8-0a0f-4b0e-9d37-5b44c1f3f2aa, 1 share is exported, 1 available share, score 105, age 8s\n" +
		"generation 1 (observed 1), version v0.3.0\n" +
		"rpc error: code = DeadlineExceeded desc = stream terminated by RST_STREAM with error code: CANCEL\n" +
		"Secret csi-manila-secrets, StorageClasses csi-manila-cephfs-fast, csi-manila-default, csi-manila-op-test-1, in 3.3s\n" +
		"kube binaries cached in /home/ci/.cache/manila-setup/kube/k8s-1.34.10_etcd-3.6.5_kwok-0.8.0\n" +
		"kubelet cached in /tmp/cold/cache/node/k8s-1.34.10\n" + // MANILA_SETUP_CACHE=/tmp/cold/cache
		"rule r (ip 10.0.0.0/24, rw, active) admits 10.0.0.31 (its address), manila-csi-driver-nfs-node-x8k2q Ready, port p with 10.0.0.31"
	if normalized(a) != normalized(b) {
		t.Errorf("the same sample from two runs differs:\n%s\n%s", normalized(a), normalized(b))
	}
	for _, other := range []string{
		strings.Replace(b, "operator running", "operator started", 1),
		strings.Replace(b, "worker-0", "worker-1", 1),
		strings.Replace(b, "generation 1", "generation 2", 1),
		strings.Replace(b, "kube/k8s-1.34.10", "kube/k8s-1.35.0", 1),
		strings.Replace(b, "node/k8s-1.34.10", "node/k8s-1.35.0", 1),
		strings.Replace(b, "ip 10.0.0.0/24", "ip 10.196.0.0/16", 1),
		strings.Replace(b, "admits 10.0.0.31", "admits 10.196.0.31", 1),
		b + "\nanother line",
	} {
		if normalized(other) == normalized(a) {
			t.Errorf("a real difference was normalized away: %q", other)
		}
	}
}
