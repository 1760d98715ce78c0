module example.com/thirdparty

go 1.26.0
