package attach

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// What Patch did to an object.
const (
	ActionPatched    = "patched"     // the object was changed
	ActionWouldPatch = "would-patch" // a dry run: it would have been changed
	ActionUnchanged  = "unchanged"   // it already has every network and security group
	ActionSkipped    = "skipped"     // it is not patched, see Reason
	ActionInvalid    = "invalid"     // its spec is broken, see Reason
)

// Result is what happened to one object, of any kind. The fields after Diff are those of some
// kinds only.
type Result struct {
	// Kind is the object's kind as the user names it: MachineSet, MachineDeployment, NodePool.
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Role is a Machine API MachineSet's machine role (worker, infra, ...).
	Role string `json:"role,omitempty"`
	// Zone is the availability zone the object's machines are made in, when it names one.
	Zone                string   `json:"zone,omitempty"`
	Action              string   `json:"action"`
	Reason              string   `json:"reason,omitempty"`
	AddedNetworks       []string `json:"addedNetworks,omitempty"`
	AddedSecurityGroups []string `json:"addedSecurityGroups,omitempty"`
	// RemovedNetworks and RemovedSecurityGroups are what a removal (patch --remove) takes off:
	// only what the object's record says manila-setup added.
	RemovedNetworks       []string `json:"removedNetworks,omitempty"`
	RemovedSecurityGroups []string `json:"removedSecurityGroups,omitempty"`
	// Warning is what to check later.
	Warning string `json:"warning,omitempty"`
	// ClusterAPI says a Machine API MachineSet was skipped because Cluster API is authoritative
	// for it: its machines follow the Cluster API MachineSet of the same name, which is patched
	// instead (the workers use case puts that copy's result in this row).
	ClusterAPI bool `json:"clusterAPI,omitempty"`
	// ConflictRetries counts the times a concurrent writer made the patch start over.
	ConflictRetries int    `json:"conflictRetries,omitempty"`
	Diff            string `json:"diff,omitempty"`

	// Template is the template a Cluster API set's machines are (or would be) made from now;
	// OldTemplate the one it was pointed away from; Rolls says who replaces the running machines.
	Template    string `json:"template,omitempty"`
	OldTemplate string `json:"oldTemplate,omitempty"`
	Rolls       string `json:"rolls,omitempty"`
	// HostedCluster is the HostedCluster of a NodePool.
	HostedCluster string `json:"hostedCluster,omitempty"`
}

// Added names what the patch adds: "network ID", then "security group ID".
func (r Result) Added() []string {
	var parts []string
	for _, id := range r.AddedNetworks {
		parts = append(parts, "network "+id)
	}
	for _, id := range r.AddedSecurityGroups {
		parts = append(parts, "security group "+id)
	}
	return parts
}

// Removed names what a removal takes off: "network ID", then "security group ID".
func (r Result) Removed() []string {
	var parts []string
	for _, id := range r.RemovedNetworks {
		parts = append(parts, "network "+id)
	}
	for _, id := range r.RemovedSecurityGroups {
		parts = append(parts, "security group "+id)
	}
	return parts
}

// Change says in words what the patch does to the object: "added ...; removed ...", or "the
// attachment record only".
func (r Result) Change() string {
	var parts []string
	if added := r.Added(); len(added) > 0 {
		parts = append(parts, "added "+strings.Join(added, ", "))
	}
	if removed := r.Removed(); len(removed) > 0 {
		parts = append(parts, "removed "+strings.Join(removed, ", "))
	}
	if len(parts) == 0 {
		return "the attachment record only"
	}
	return strings.Join(parts, "; ")
}

// Writes reports whether the result is (or, on a dry run, would be) a change.
func (r Result) Writes() bool { return r.Action == ActionPatched || r.Action == ActionWouldPatch }

// Ref names one object in messages: "MachineSet openshift-machine-api/x".
type Ref struct {
	Kind, Namespace, Name string
	// Resource is what RBAC calls its kind: "machinesets.machine.openshift.io".
	Resource string
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// SelectionError says that a selection (--name, --selector) names nothing that exists.
type SelectionError struct{ msg string }

func (e *SelectionError) Error() string { return e.msg }

// NewSelectionError is a SelectionError saying msg.
func NewSelectionError(msg string) *SelectionError { return &SelectionError{msg} }

// writeError turns a failed write of ref into a sentence that says what was and was not changed.
func writeError(ref Ref, err error, attempts int, done []Result) error {
	already := alreadyDone(done)
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("patching %s was refused: %v. Patching needs the patch verb on %s in %s; %s",
			ref, APIMessage(err), ref.Resource, ref.Namespace, already)
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s kept changing while it was being patched (%d attempts): %v; %s",
			ref, attempts, APIMessage(err), already)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s was deleted while it was being patched; %s", ref, already)
	}
	return fmt.Errorf("patching %s: %w; %s", ref, err, already)
}

// alreadyDone says which objects were patched before a failure.
func alreadyDone(done []Result) string {
	var patched []string
	for _, r := range done {
		if r.Action == ActionPatched {
			patched = append(patched, strings.TrimSpace(r.Kind+" "+r.Name))
		}
	}
	if len(patched) == 0 {
		return "nothing was changed"
	}
	return fmt.Sprintf("patched before that: %s; the others were not changed", strings.Join(patched, ", "))
}

// APIMessage is the apiserver's sentence for err.
func APIMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}
