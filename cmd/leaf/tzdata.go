package main

// The time zone database, embedded: a periodic tag's periods follow its
// time zone's calendar, and every server must find the zone whatever the
// host has installed (a scratch image, a minimal VM). Go uses the host's
// database first and this one only when that lacks a zone.
import _ "time/tzdata"
