package standin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// DialCSI connects to a gRPC server (a path is a unix socket), retrying every second at most as
// csi-lib-utils does, until the connection is ready or ctx ends; the error then carries ctx's
// cause.
func DialCSI(ctx context.Context, address string) (*grpc.ClientConn, error) {
	target := address
	if strings.HasPrefix(address, "/") {
		target = "unix://" + address
	}
	bc := backoff.DefaultConfig
	bc.MaxDelay = time.Second
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc}))
	if err != nil {
		return nil, fmt.Errorf("connecting to CSI driver at %s: %w", address, err)
	}
	conn.Connect()
	for state := conn.GetState(); state != connectivity.Ready; state = conn.GetState() {
		if !conn.WaitForStateChange(ctx, state) {
			_ = conn.Close()
			return nil, fmt.Errorf("CSI driver at %s did not accept a connection: %w (last state %s)", address, context.Cause(ctx), state)
		}
	}
	return conn, nil
}

// DriverName asks the CSI driver on conn for its name (GetPluginInfo); an empty name is an
// error, as the CSI spec requires one.
func DriverName(ctx context.Context, conn grpc.ClientConnInterface) (string, error) {
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return "", err
	}
	if info.GetName() == "" {
		return "", errors.New("the driver answered GetPluginInfo with an empty driver name")
	}
	return info.GetName(), nil
}
