// Package datacodec encodes player data for storage so that it survives
// servers of different versions.
package datacodec
