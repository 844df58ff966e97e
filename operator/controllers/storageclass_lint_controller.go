package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/metadata"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/sclint"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// The StorageClass lint controller checks the Manila StorageClasses the operator did not write
// (operator/sclint) and says what it finds on StorageClassesValid and in a Warning Event about
// each class; it never writes to a user's class. It looks again when a StorageClass changes
// and at every resync, with Manila's share types as the Manila controller last heard them.
const scLintName = "StorageClassLint"

// ConditionStorageClassesValid is False when a Manila StorageClass of someone else's would
// fail or be silently misread by the driver.
const ConditionStorageClassesValid = "StorageClassesValid"

type scLintController struct {
	spec           func() *operatorv1.OperatorSpec
	applyStatus    func(ctx context.Context, manager string, st *machinery.Status) error
	storageClasses storagelisters.StorageClassLister
	// manila is what the Manila controller last learned of Manila (the share types).
	manila *machinery.Published[manilaFindings]
	// listShareClients: the driver takes a comma-separated nfs-shareClient.
	listShareClients bool
	shareClients     func() (shareclient.Answer, error)
	// driverNamespace is where the driver runs, the only namespace whose Secrets its controller
	// may read.
	driverNamespace string
	// secretExists tells whether a Secret exists, and whether it can tell.
	secretExists func(ctx context.Context, namespace, name string) (exists, known bool)
	recorder     machinery.Recorder

	mu     sync.Mutex
	warned map[string]string // class -> the findings last reported in an Event
}

func newStorageClassLintController(w wiring) *machinery.Controller {
	c := &scLintController{
		spec: w.ops.spec, applyStatus: w.ops.applyStatus, storageClasses: w.l.StorageClasses, manila: w.findings,
		listShareClients: w.profile.listShareClients, shareClients: w.mounts.answer,
		secretExists:    secretLookup{namespace: w.cfg.Namespace, secrets: w.l.Secrets, metadata: w.kube.Metadata}.exists,
		driverNamespace: w.cfg.Namespace,
		recorder:        w.recorder,
		warned:          map[string]string{},
	}
	ctrl := w.loop.Controller(scLintName+"Controller", c.sync, w.inf.StorageClasses, w.inf.Secrets, w.inf.ClusterConfig)
	// Where the workers mount from follows the MachineSets and their Machines.
	onMachineAPI(w.inf.OnDynamic, ctrl)
	return ctrl
}

func (c *scLintController) sync(ctx context.Context, _ *machinery.Controller) error {
	spec := c.spec()
	if spec == nil || spec.ManagementState != operatorv1.Managed {
		return nil
	}
	all, err := c.storageClasses.List(labels.Everything())
	if err != nil {
		return err
	}
	facts := sclint.Facts{ShareTypes: c.manila.Load().shareTypeNames(), SecretNamespace: c.driverNamespace,
		SecretExists: func(ns, name string) (bool, bool) { return c.secretExists(ctx, ns, name) }}
	facts.ListAllowed = c.listShareClients
	if answer, err := c.shareClients(); err == nil {
		facts.MountFrom = &answer
	}
	var findings []sclint.Finding
	checked := 0
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	for _, sc := range all {
		if sc.Provisioner != operator.DriverName || sc.Labels[operator.LabelManagedBy] == operator.ManagedByValue {
			continue
		}
		checked++
		f := sclint.Check(sc, facts)
		findings = append(findings, f...)
		c.warn(sc, f)
	}
	msg := "no Manila StorageClass besides the operator's own to check"
	if checked > 0 {
		msg = fmt.Sprintf("%d Manila StorageClasses besides the operator's own checked: nothing wrong", checked)
	}
	cond := machinery.Condition(ConditionStorageClassesValid, operatorv1.ConditionTrue, "AsExpected", msg)
	if len(findings) > 0 {
		lines := make([]string, 0, len(findings))
		for i, f := range findings {
			if i == 10 {
				lines = append(lines, fmt.Sprintf("and %d more (manila-setup storageclasses check lists them all)", len(findings)-10))
				break
			}
			lines = append(lines, f.String())
		}
		cond = machinery.Condition(ConditionStorageClassesValid, operatorv1.ConditionFalse, "InvalidParameters", strings.Join(lines, "\n"))
	}
	return c.applyStatus(ctx, scLintName, machinery.NewStatus().WithConditions(cond))
}

// secretLookup tells whether a Secret exists, for the lint.
type secretLookup struct {
	namespace string
	secrets   corelisters.SecretLister
	metadata  metadata.Interface
}

// secretExists can tell only in the operator's namespace, the one where it may read Secrets:
// from its cache for its own, else with one GET (made only while a user's class names such a
// Secret). Elsewhere it cannot tell; `manila-setup storageclasses check` can.
func (s secretLookup) exists(ctx context.Context, namespace, name string) (exists, known bool) {
	if namespace != s.namespace {
		return false, false
	}
	if _, err := s.secrets.Secrets(namespace).Get(name); err == nil {
		return true, true
	}
	return sclint.SecretExists(ctx, s.metadata, namespace, name)
}

// warn records a Warning Event about the class when its findings changed since the last one.
func (c *scLintController) warn(sc *storagev1.StorageClass, findings []sclint.Finding) {
	text := ""
	for _, f := range findings {
		text += f.String() + "\n"
	}
	c.mu.Lock()
	same := c.warned[sc.Name] == text
	c.warned[sc.Name] = text
	c.mu.Unlock()
	if same || text == "" {
		return
	}
	c.recorder.WarningOn(corev1.ObjectReference{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass", Name: sc.Name, UID: sc.UID},
		"StorageClassInvalid", "%s", strings.TrimSuffix(text, "\n"))
}
