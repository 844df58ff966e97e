package controllers

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// The driver Secret controller's sync, on fakes: what it applies, deletes and reports.
func TestSecretControllerSync(t *testing.T) {
	const cloudsYAML = "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example.test/v3\n      username: demo\n      password: s3cret-value\n      project_name: demo\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n"
	creds, err := operator.ParseCredentials([]byte(cloudsYAML), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		state    operatorv1.ManagementState
		disabled bool
		credErr  error
		applyErr error
		// wants: what was written ("apply <keys>", "delete") and the Available condition.
		write, available string
	}{
		{name: "Unmanaged", state: operatorv1.Unmanaged},
		{name: "driver not installed", state: operatorv1.Managed, disabled: true},
		{name: "credentials translated", state: operatorv1.Managed, write: "apply", available: "True AsExpected"},
		{name: "bad credentials keep the last good Secret", state: operatorv1.Managed,
			credErr: &ManilaError{Reason: ReasonAuthFailed, Message: "clouds.yaml has no cloud"}, available: "False InvalidCredentials"},
		{name: "apply refused", state: operatorv1.Managed, applyErr: errors.New("forbidden"), write: "apply", available: "False ApplyFailed"},
		{name: "Removed", state: operatorv1.Removed, write: "delete", available: "False Removed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var writes []string
			var applied *corev1.Secret
			var status *machinery.Status
			c := &secretController{
				operands: operands{
					namespace: "ns",
					spec:      func() *operatorv1.OperatorSpec { return &operatorv1.OperatorSpec{ManagementState: tt.state} },
					enabled:   func() bool { return !tt.disabled },
					apply: func(_ context.Context, obj runtime.Object) (runtime.Object, error) {
						writes = append(writes, "apply")
						applied = obj.(*corev1.Secret)
						return obj, tt.applyErr
					},
					deleteIfPresent: func(_ context.Context, obj runtime.Object) error {
						writes = append(writes, "delete")
						return nil
					},
					applyStatus: func(_ context.Context, manager string, st *machinery.Status) error {
						status = st
						return nil
					},
				},
				credentials: func() (*operator.Credentials, error) {
					if tt.credErr != nil {
						return nil, tt.credErr
					}
					return creds, nil
				},
			}
			err := c.sync(context.Background(), nil)
			if (err != nil) != (tt.applyErr != nil) {
				t.Errorf("sync: %v", err)
			}
			if got := strings.Join(writes, ","); got != tt.write {
				t.Errorf("writes %q, want %q", got, tt.write)
			}
			got := ""
			if status != nil {
				if a := machinery.FindCondition(status.Conditions, secretName+"Available"); a != nil {
					got = string(a.Status) + " " + a.Reason
					if strings.Contains(a.Message, "s3cret-value") {
						t.Errorf("a secret value in the condition: %s", a.Message)
					}
				}
			}
			if got != tt.available {
				t.Errorf("Available %q, want %q", got, tt.available)
			}
			if applied != nil && (applied.Namespace != "ns" || applied.Name != operator.DriverSecretName ||
				applied.Labels[operator.LabelManagedBy] != operator.ManagedByValue || string(applied.Data["os-password"]) != "s3cret-value") {
				t.Errorf("applied Secret %s/%s labels %v keys %v", applied.Namespace, applied.Name, applied.Labels, slices.Sorted(maps.Keys(applied.Data)))
			}
		})
	}
}
