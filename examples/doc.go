// Package examples holds the images of berm's example programs, built from
// the sources beside it, so that the berm binary can deploy them by name,
// with the grants the deployment gives them:
//
//	berm deploy --example hello
//	berm deploy --example files --allow-dir ./notes:/notes
//
// In Go:
//
//	image, ok := examples.Image("hello")
package examples
