//go:build !linux

package main

import "errors"

// kernelInterfaces is Linux only (javaip_linux.go); elsewhere defaultIP uses
// package net's list.
func kernelInterfaces() ([]netIface, error) {
	return nil, errors.New("SIOCGIFCONF is read on Linux only")
}
