package mustgather

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/manila-setup/manila-setup/operator"
)

// The scrubber learns the secret values of the gathered namespaces' Secrets (secret keys whole,
// files whole, the passwords inside a clouds.yaml) and removes them, in every encoding, from what
// is written; a user name or a region stays.
func TestScrub(t *testing.T) {
	const password = "s3cr3t pw/&+="
	clouds := "clouds:\n  openstack:\n    auth:\n      username: demo\n      password: \"" + password + "\"\n    region_name: RegionOne\n"
	kube := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.CredentialsSecretName, Namespace: operator.DefaultNamespace},
			Data: map[string][]byte{"clouds.yaml": []byte(clouds)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.DriverSecretName, Namespace: operator.DefaultNamespace},
			Data: map[string][]byte{"os-password": []byte(password), "os-userName": []byte("demo"), "os-region": []byte("RegionOne"),
				"os-applicationCredentialSecret": []byte("app-cred-secret-1")}},
	)
	g := &gatherer{o: Options{Kube: kube, Dir: t.TempDir()}}
	g.learnSecrets(context.Background())
	text := strings.Join([]string{
		"auth with " + password,
		"base64 " + base64.StdEncoding.EncodeToString([]byte(password)),
		"query ?p=" + url.QueryEscape(password),
		"path /" + url.PathEscape(password),
		"app app-cred-secret-1",
		"the file " + clouds,
		"user demo in RegionOne",
	}, "\n")
	if err := g.write("x/log.txt", []byte(text)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(g.o.Dir, "x", "log.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, leak := range []string{password, base64.StdEncoding.EncodeToString([]byte(password)), url.QueryEscape(password), url.PathEscape(password), "app-cred-secret-1"} {
		if strings.Contains(out, leak) {
			t.Errorf("%q left in:\n%s", leak, out)
		}
	}
	if !strings.Contains(out, "user demo in RegionOne") || strings.Count(out, "<redacted>") < 6 {
		t.Errorf("scrubbed too much or too little:\n%s", out)
	}
	if g.sum.Files != 1 || g.sum.Bytes != int64(len(b)) {
		t.Errorf("summary %+v, want 1 file of %d bytes", g.sum, len(b))
	}
}

// BenchmarkScrub is the scrubber on one container log of the size kept (8 MiB), against the
// secret values of a driver-mode cluster: the two Secrets of TestScrub, in every encoding.
func BenchmarkScrub(b *testing.B) {
	clouds := "clouds:\n  openstack:\n    auth:\n      username: demo\n      password: \"s3cr3t pw/&+=\"\n"
	kube := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.CredentialsSecretName, Namespace: operator.DefaultNamespace},
			Data: map[string][]byte{"clouds.yaml": []byte(clouds)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.DriverSecretName, Namespace: operator.DefaultNamespace},
			Data: map[string][]byte{"os-password": []byte("s3cr3t pw/&+="), "os-userName": []byte("demo"), "os-applicationCredentialSecret": []byte("app-cred-secret-1")}},
	)
	g := &gatherer{o: Options{Kube: kube}}
	g.learnSecrets(context.Background())
	line := []byte("I1128 14:00:00.000000       1 controller.go:123] CreateVolume: called with args {Name:pvc-0ffbaf3f-da9b-4799-b1dd-7484f2ab96bf}\n")
	log := bytes.Repeat(line, DefaultLogLimit/len(line))
	b.SetBytes(int64(len(log)))
	b.ReportAllocs()
	for b.Loop() {
		_ = g.scrub(log)
	}
	b.ReportMetric(float64(len(g.secrets)), "forms")
}
