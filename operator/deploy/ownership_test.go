package deploy

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func conflict(messages ...string) error {
	st := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict,
		Details: &metav1.StatusDetails{}}}
	for _, m := range messages {
		st.ErrStatus.Details.Causes = append(st.ErrStatus.Details.Causes, metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: m, Field: ".spec.replicas"})
	}
	return st
}

// A conflict with the operator's own fields is taken back; one with anybody else's, or of a shape
// not understood, is the user's to decide.
func TestConflictOnlyOurs(t *testing.T) {
	for _, c := range []struct {
		messages []string
		want     bool
	}{
		{[]string{`conflict with "manila-csi-driver-operator" using operator.openshift.io/v1`}, true},
		{[]string{`conflict with "manila-setup-operator"`, `conflict with "manila-csi-driver-operator"`}, true},
		{[]string{`conflict with "manila-csi-driver-operator"`, `conflict with "kubectl-edit" using apps/v1`}, false},
		{[]string{`conflict with "cluster-storage-operator"`}, false},
		{[]string{`something else`}, false},
		{nil, false},
	} {
		e := &conflictError{managers: conflictManagers(conflict(c.messages...))}
		if got := e.onlyOurs(); got != c.want {
			t.Errorf("%q: onlyOurs %t, want %t (managers %q)", c.messages, got, c.want, e.managers)
		}
	}
}

func TestIsOursAndManagers(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "cluster-storage-operator"}, {Manager: "kube-controller-manager", Subresource: "status"}})
	if isOurs(u) {
		t.Error("an object written by cluster-storage-operator alone is ours")
	}
	if got := managersOf(u); got != `"cluster-storage-operator"` {
		t.Errorf("managersOf %s, want the spec's writer only", got)
	}
	u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "manila-setup"})
	if !isOurs(u) {
		t.Error("an object with our label is not ours")
	}
	v := &unstructured.Unstructured{}
	v.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "manila-setup"}})
	if !isOurs(v) {
		t.Error("an object our installer wrote is not ours")
	}
	if managersOf(&unstructured.Unstructured{}) != "no field manager" {
		t.Error("an object without managed fields")
	}
}
