package deploy

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/operator/platform"
)

// RefusedError says why Install wrote nothing: the cluster is one where manila-setup's
// operator must not deploy the driver (the platform runs its own Manila CSI driver operator
// under the same names, or the cluster is not on OpenStack).
type RefusedError struct {
	Detection platform.Detection
}

func (e *RefusedError) Error() string {
	d := e.Detection
	if d.Mode == platform.ModeNone {
		return "nothing installed: " + d.Message
	}
	return fmt.Sprintf("nothing installed: the platform already runs its own Manila CSI driver operator and owns %s, "+
		"the names manila-setup's operator would write. Its driver serves Manila shares already: attach the workers "+
		"to the storage network with `manila-setup networks attach` (or `machinesets patch`), and read the driver's "+
		"health with `manila-setup operator status`", strings.Join(d.PlatformObjects, "; "))
}

// checkPlatform reads which kind of cluster this is (operator/platform) and refuses, before
// anything is written, where the platform owns the objects or there is no OpenStack.
func checkPlatform(ctx context.Context, dyn dynamic.Interface) (platform.Detection, error) {
	d, err := platform.Detect(ctx, platform.Dynamic(dyn))
	if err != nil {
		return d, err
	}
	if d.Mode != platform.ModeDriver {
		return d, &RefusedError{Detection: d}
	}
	return d, nil
}
