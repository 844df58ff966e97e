package main

import "github.com/manila-setup/manila-setup/operator"

// imageRepo is the repository of this build's operator image, set at build time by the
// Makefile (-X main.imageRepo=$(IMAGE_REPO)), where make image puts the image of the same
// version.
var imageRepo = "localhost/manila-setup"

// The operator image `operator render|install` point at by default is the one of this CLI's own
// version; a build without a version has none (OPERATOR_IMAGE or --image is then needed).
func init() {
	if ref, err := operator.OperatorImage(imageRepo, version); err == nil {
		operator.DefaultOperatorImage = ref
	}
}
