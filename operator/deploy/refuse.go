package deploy

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/platform"
)

// RefusedError says why Install wrote nothing: the manifests are of a mode the cluster is not
// of. Driver-mode manifests carry the platform's names, so they are never applied where the
// platform runs its own Manila CSI driver operator; companion manifests accompany that operator,
// so they are not applied where there is none; off OpenStack nothing is.
type RefusedError struct {
	Detection platform.Detection
	// Wanted is the mode of the manifests.
	Wanted platform.Mode
}

func (e *RefusedError) Error() string {
	d := e.Detection
	switch {
	case d.Mode == platform.ModeNone:
		return "nothing installed: " + d.Message
	case e.Wanted == platform.ModeCompanion:
		return fmt.Sprintf("nothing installed: companion mode accompanies the platform's own Manila CSI driver operator, and this cluster has none (%s). Install in driver mode instead: manila-setup operator install --mode driver", d.Message)
	}
	return fmt.Sprintf("nothing installed: the platform already runs its own Manila CSI driver operator and owns %s, "+
		"the names manila-setup's operator would write in driver mode. Install the companion instead, which writes none of "+
		"them (manila-setup operator install --mode companion, the default on this cluster); attach the workers to the "+
		"storage network with `manila-setup networks attach` (or `machinesets patch`), and read the driver's health with "+
		"`manila-setup operator status`", strings.Join(d.PlatformObjects, "; "))
}

// RenderedMode tells the mode of rendered manifests: companion when they hold the
// ManilaCompanion object or its CRD, else driver.
func RenderedMode(objs []*unstructured.Unstructured) platform.Mode {
	for _, u := range objs {
		if u.GetKind() == operator.CompanionKind || u.GetName() == operator.CompanionResource+"."+operator.CompanionGroup {
			return platform.ModeCompanion
		}
	}
	return platform.ModeDriver
}

// checkPlatform reads which kind of cluster this is (operator/platform) and refuses, before
// anything is written, where it is not of the wanted mode.
func checkPlatform(ctx context.Context, dyn dynamic.Interface, wanted platform.Mode) (platform.Detection, error) {
	d, err := platform.Detect(ctx, platform.Dynamic(dyn))
	if err != nil {
		return d, err
	}
	if d.Mode != wanted {
		return d, &RefusedError{Detection: d, Wanted: wanted}
	}
	return d, nil
}
