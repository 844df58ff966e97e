package health

import (
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestJudge(t *testing.T) {
	for _, tt := range []struct {
		c    Condition
		want Verdict
	}{
		{Condition{Type: "ManilaControllerAvailable", Status: "True"}, Good},
		{Condition{Type: "ManilaControllerAvailable", Status: "False"}, Bad},
		{Condition{Type: "ManilaDriverControllerServiceDegraded", Status: "True"}, Bad},
		{Condition{Type: "ManilaDriverControllerServiceDegraded", Status: "False"}, Good},
		{Condition{Type: "ManilaDriverNodeServiceProgressing", Status: "True"}, Progressing},
		{Condition{Type: "ManilaDriverNodeServiceProgressing", Status: "False"}, Good},
		{Condition{Type: "ManilaControllerDisabled", Status: "True"}, Info},
		{Condition{Type: "ManilaControllerDisabled", Status: "False"}, Info},
		{Condition{Type: "StorageNetworkReachable", Status: "True"}, Info},
		{Condition{Type: "StorageNetworkReachable", Status: "False"}, Bad},
		{Condition{Type: "StorageNetworkReachable", Status: "Unknown"}, Bad},
		{Condition{Type: "ManilaReachable", Status: "False"}, Bad},
		{Condition{Type: "DriverMode", Status: "False"}, Info},
		{Condition{Type: "Upgradeable", Status: "False"}, Info},
	} {
		if got := Judge(tt.c); got != tt.want {
			t.Errorf("Judge(%s=%s) = %v, want %v", tt.c.Type, tt.c.Status, got, tt.want)
		}
	}
}

func TestHealthy(t *testing.T) {
	available := []Condition{{Type: "ManilaControllerAvailable", Status: "True"}, {Type: "ManilaControllerDegraded", Status: "False"}}
	outage := append(available, Condition{Type: "ManilaReachable", Status: "False"}, Condition{Type: "StorageNetworkReachable", Status: "False"})
	degraded := []Condition{{Type: "ManilaControllerDegraded", Status: "True"}}
	noManila := []Condition{{Type: "ManilaControllerDisabled", Status: "True"}}
	for _, tt := range []struct {
		name                 string
		conds                []Condition
		available, installed bool
		want                 bool
	}{
		{"everything available", available, true, true, true},
		{"Manila unreachable, the driver works", outage, true, true, true},
		{"a workload unavailable", available, false, true, false},
		{"Degraded", degraded, true, true, false},
		{"no Manila, nothing installed", noManila, false, false, true},
		{"no Manila but a broken driver", noManila, false, true, false},
	} {
		if got := Healthy(tt.conds, tt.available, tt.installed); got != tt.want {
			t.Errorf("%s: Healthy = %v", tt.name, got)
		}
	}
}

func TestStorageClasses(t *testing.T) {
	list := []storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "csi-manila-default"}, Provisioner: "manila.csi.openstack.org"},
		{ObjectMeta: metav1.ObjectMeta{Name: "admins-rwx"}, Provisioner: "manila.csi.openstack.org"},
		{ObjectMeta: metav1.ObjectMeta{Name: "csi-manila-lookalike"}, Provisioner: "cinder.csi.openstack.org"},
		{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "cinder.csi.openstack.org"},
	}
	got := StorageClasses(list)
	if len(got) != 2 || got[0] != "admins-rwx" || got[1] != "csi-manila-default" {
		t.Errorf("StorageClasses = %v", got)
	}
}
