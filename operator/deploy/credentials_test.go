package deploy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCredentialsSource(t *testing.T) {
	for _, tt := range []struct {
		s    *corev1.Secret
		want string
	}{
		{nil, "missing"},
		{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{CCOAnnotation: "openshift-cloud-credential-operator/manila-setup-operator"}}},
			"the cloud-credential operator (CredentialsRequest openshift-cloud-credential-operator/manila-setup-operator)"},
		{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/managed-by": "manila-setup"}}}, "clouds.yaml"},
		{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "manila-cloud-credentials", Namespace: "ns"}, Data: map[string][]byte{"clouds.yaml": []byte("password: s3cret")}}, "made by hand"},
	} {
		got := CredentialsSource(tt.s)
		if !strings.Contains(got, tt.want) || strings.Contains(got, "s3cret") {
			t.Errorf("CredentialsSource = %q, want %q", got, tt.want)
		}
	}
}
