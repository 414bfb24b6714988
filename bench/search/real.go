package main

import "errors"

func realRow(name string, scale float64) (row, error) { return row{}, errors.New("not yet") }
