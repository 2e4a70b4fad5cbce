{
  echo "region,product,amount"
  echo "north,widget,120"
  echo "south,gadget,75"
  echo "east,widget,300"
  echo "west,gizmo,42"
  echo "north,gizmo,8"
  echo "south,widget,255"
} > sales.csv
